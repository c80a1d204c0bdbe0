import type { Command } from 'commander'
import { createOrder } from '../accounts.js'
import type { MailOrder } from '../storage/store.js'
import { accountAction, accountOption, adminAction, ownedOrder, positiveInt, senderPattern } from './common.js'
import { addPolicyCommand } from './policy.js'

const collect = (value: string, previous: string[]) => [...previous, senderPattern(value)]

const orderJson = (o: MailOrder) => ({
  id: o.id,
  username: `mb${o.id}`,
  status: o.status,
  comment: o.comment,
  senders: o.senders,
  sandbox: o.sandbox,
  list: o.list === true,
})

/** `order` and `sender`: mail orders (sending credentials) and their authorized senders. */
export function addOrderCommands(program: Command): void {
  const order = program.command('order').description('Manage mail orders (sending credentials)')
  accountAction(
    order
      .command('create')
      .description('Create an active mail order; prints its SMTP username and password')
      .addOption(accountOption())
      .option('--comment <text>', 'a note shown in listings')
      .option('--sender <addr|@domain>', 'authorized sender (repeatable); none = any sender', collect, [])
      .option('--sandbox', 'a sandbox order: its mail, whatever the door, is logged but never leaves')
      .option('--list', 'a bulk order: its mail gets a one-click unsubscribe link, one recipient per message'),
    async (rt, o) => {
      const sandbox = o.sandbox === true
      const list = o.list === true
      const { order, password } = await createOrder(rt, o.account, o.comment ?? null, o.sender, { sandbox, list })
      return { id: order.id, username: `mb${order.id}`, password, status: order.status, sandbox, list }
    },
    (r) =>
      `${r.sandbox ? 'sandbox ' : ''}${r.list ? 'bulk ' : ''}mail order ${r.id} created\nSMTP username: ${r.username}\nSMTP password: ${r.password}`,
  )
  adminAction(
    order
      .command('cancel')
      .description('Cancel a mail order: it can no longer send; its history stays')
      .argument('<id>', 'mail order id', positiveInt('id')),
    async (rt, _o, id: number) => {
      await ownedOrder(rt, id)
      await rt.store.orders.setStatus(id, 'canceled')
      return { id, status: 'canceled' }
    },
    (r) => `mail order ${r.id} canceled`,
  )
  adminAction(
    order
      .command('password')
      .description("Manage a mail order's SMTP password")
      .command('rotate')
      .description('Replace the SMTP password with a new one; the old one stops working at once')
      .requiredOption('--order <id>', 'mail order id', positiveInt('--order')),
    async (rt, o) => {
      await ownedOrder(rt, o.order)
      return { id: o.order, username: `mb${o.order}`, password: await rt.store.orders.rotatePassword(o.order) }
    },
    (r) => `mail order ${r.id}: new SMTP password\nSMTP username: ${r.username}\nSMTP password: ${r.password}`,
  )
  addPolicyCommand(
    order,
    "Print or set a mail order's send policy: what SMTP submission with it may send alone, and what waits for a person",
    ['<id>', 'mail order id'],
    async (_rt, id) => ({ kind: 'order', id: positiveInt('id')(id) }),
  )
  accountAction(
    order.command('list').description("List an account's mail orders").addOption(accountOption()),
    async (rt, o) => (await rt.store.orders.list(o.account)).map(orderJson),
    (rows) =>
      rows
        .map(
          (r) =>
            `${r.id}\t${r.username}\t${r.status}${r.sandbox ? ' (sandbox)' : ''}${r.list ? ' (bulk)' : ''}\t${r.senders.join(',') || '(any sender)'}\t${r.comment ?? ''}`,
        )
        .join('\n') || 'no orders',
  )

  const sender = program.command('sender').description("Manage a mail order's authorized senders")
  for (const [name, description] of [
    ['allow', 'Authorize a sender address or @domain for an order'],
    ['revoke', 'Remove an authorized sender from an order'],
  ] as const) {
    adminAction(
      sender
        .command(name)
        .description(description)
        .requiredOption('--order <id>', 'mail order id', positiveInt('--order'))
        .argument('<sender>', 'address or @domain', senderPattern),
      async (rt, o, pattern: string) => {
        await ownedOrder(rt, o.order)
        const changed =
          name === 'allow'
            ? await rt.store.orders.addSender(o.order, pattern)
            : await rt.store.orders.removeSender(o.order, pattern)
        if (name === 'revoke' && !changed) throw new Error(`${pattern} is not an authorized sender of order ${o.order}`)
        return orderJson(await ownedOrder(rt, o.order))
      },
      (r) => `order ${r.id} senders: ${r.senders.join(', ') || '(any sender)'}`,
    )
  }
}
