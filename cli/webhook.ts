import { type Command, InvalidArgumentError } from 'commander'
import { WEBHOOK_EVENT_TYPES } from '../storage/store.js'
import { accountAction, accountOption, asAccount, positiveInt } from './common.js'

const eventType = (value: string, previous: string[]) => {
  const types = value.split(',').map((t) => t.trim())
  for (const t of types)
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(t))
      throw new InvalidArgumentError(`"${t}" is not an event type (${WEBHOOK_EVENT_TYPES.join(', ')})`)
  return [...previous, ...types]
}

/** `webhook`: an account's webhooks (the addWebhook, getWebhooks and deleteWebhook tools). */
export function addWebhookCommands(program: Command): void {
  const webhook = program.command('webhook').description("Manage an account's webhooks (signed message events)")
  accountAction(
    webhook
      .command('add')
      .description('Add a webhook; prints its id and signing secret, shown only now')
      .addOption(accountOption())
      .argument('<url>', 'the endpoint, https:// recommended')
      .requiredOption(
        '--event <type>',
        `event type, repeatable or comma-separated: ${WEBHOOK_EVENT_TYPES.join(', ')}`,
        eventType,
        [],
      )
      .option('--description <text>', 'a note shown in listings'),
    (rt, o, url: string) =>
      asAccount<{ id: number; secret: string }>(
        rt,
        o.account,
        () => import('../tools/add-webhook.js').then((m) => m.addWebhook),
        {
          url,
          events: o.event,
          description: o.description,
        },
      ),
    (r) => `webhook ${r.id} added\nsigning secret (shown only now): ${r.secret}`,
  )
  accountAction(
    webhook.command('list').description("List an account's webhooks").addOption(accountOption()),
    (rt, o) =>
      asAccount<{ id: number; url: string; events: string[]; status: string; lastError: string | null }[]>(
        rt,
        o.account,
        () => import('../tools/get-webhooks.js').then((m) => m.getWebhooks),
        {},
      ),
    (rows) =>
      rows
        .map((r) => `${r.id}\t${r.url}\t${r.events.join(',')}\t${r.status}${r.lastError ? `\t${r.lastError}` : ''}`)
        .join('\n') || 'no webhooks',
  )
  accountAction(
    webhook
      .command('remove')
      .description('Delete a webhook, with the events still waiting for it')
      .addOption(accountOption())
      .argument('<id>', 'webhook id', positiveInt('id')),
    async (rt, o, id: number) => {
      await asAccount(rt, o.account, () => import('../tools/delete-webhook.js').then((m) => m.deleteWebhook), { id })
      return { id, deleted: true }
    },
    (r) => `webhook ${r.id} deleted`,
  )
}
