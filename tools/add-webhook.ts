import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { badInput } from '../errors.js'
import { webhookUrlProblem } from '../relay/webhook-post.js'
import { utcDateTime } from './common.js'
import { accountOf, defineTool, JSON_AND_FORM } from './define.js'
import { WebhookEventType, type WebhookRecord } from './webhook-schemas.js'

/** Webhooks an account may have: each event is posted to each of them. */
export const MAX_WEBHOOKS = 10

/** A new signing secret: `whsec_` and 32 random bytes in base64 (Standard Webhooks). */
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`

export const addWebhook = defineTool({
  name: 'addWebhook',
  title: 'Add a webhook',
  http: { method: 'POST', path: '/webhooks', bodyTypes: JSON_AND_FORM },
  errors: [400],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description:
    "Adds an endpoint (https recommended) that is POSTed the account's message events of the given types, " +
    'signed per Standard Webhooks. Returns its `id` and signing `secret` (whsec_…), shown only now.',
  input: z.object({
    url: z.string().trim().min(1).max(2000),
    events: z.array(WebhookEventType).min(1),
    description: z.string().trim().max(200).optional(),
  }),
  output: z.object({ id: z.number().int(), secret: z.string() }),
  handler: async (input, ctx) => {
    const accountId = accountOf(ctx)
    const problem = webhookUrlProblem(input.url, ctx.config.webhooks.allowPrivate)
    if (problem) throw badInput(`url: ${problem}`)
    if ((await ctx.store.webhooks.list(accountId)).length >= MAX_WEBHOOKS)
      throw badInput(`this account has ${MAX_WEBHOOKS} webhooks, the most it may have; delete one first`)
    const secret = newWebhookSecret()
    const hook = await ctx.store.webhooks.create({
      accountId,
      url: input.url,
      events: [...new Set(input.events)],
      description: input.description || null,
      secret,
      now: ctx.clock(),
    })
    return { id: hook.id, secret }
  },
})

/** A stored webhook as the tools show it. */
export function webhookRecord(hook: import('../storage/store.js').Webhook): z.input<typeof WebhookRecord> {
  return {
    id: hook.id,
    url: hook.url,
    events: hook.events,
    description: hook.description,
    created: utcDateTime(hook.createdAt),
    status: hook.disabledAt !== null ? 'disabled' : hook.failingSince !== null ? 'failing' : 'enabled',
    lastError:
      hook.lastError === null ? null : `${hook.lastError} (${utcDateTime(hook.lastErrorAt ?? hook.createdAt)} UTC)`,
  }
}
