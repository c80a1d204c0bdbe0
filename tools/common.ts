import { badInput, notFound } from '../errors.js'
import { toMailboxes, type Mailbox } from '../relay/addresses.js'
import { composeMessage, type ComposeInput } from '../relay/message.js'
import type { Submitted } from '../relay/pipeline.js'
import type { BoundPolicy } from '../relay/policy.js'
import type { MailOrder } from '../storage/store.js'
import { accountOf, type ToolContext } from './define.js'

/**
 * The mail order a call acts on: the given id, which must be an active order of the caller's
 * account, or else the account's first active order (lowest id). Other accounts' orders are
 * answered exactly like missing ones.
 */
export async function resolveOrder(
  ctx: ToolContext,
  id: number | undefined,
  options: { allowCanceled?: boolean } = {},
): Promise<MailOrder> {
  const accountId = accountOf(ctx)
  if (id !== undefined) {
    const order = await ctx.store.orders.get(id)
    if (!order || order.accountId !== accountId) throw notFound(`id: mail order ${id} not found`)
    if (order.status !== 'active' && !options.allowCanceled)
      throw notFound(`id: mail order ${id} is canceled; use an active order`)
    return order
  }
  const first = (await ctx.store.orders.list(accountId)).find((o) => o.status === 'active')
  if (!first) throw notFound('this account has no active mail order')
  return first
}

/** An order as the tools show it, without its password. */
export const orderFields = (order: MailOrder) => ({
  id: order.id,
  status: order.status,
  username: `mb${order.id}`,
  ...(order.comment ? { comment: order.comment } : {}),
  ...(order.sandbox ? { sandbox: true } : {}),
  ...(order.list ? { list: true } : {}),
})

/**
 * Why the caller may not see (or set) the order's SMTP password, or undefined when it may. The
 * password sends what the order sends over SMTP, outside the caller's own limits: so only a caller
 * that may send that mail itself sees it. A sandbox key, or a token granted with one, may send
 * sandbox mail only (a sandbox order's); an access token may send nothing without `mail:send`; a
 * caller under a send policy may not go around it through an order that has none.
 */
export function passwordWithheld(ctx: ToolContext, order: Pick<MailOrder, 'sandbox' | 'policy'>): string | undefined {
  if (ctx.scopes && !ctx.scopes.includes('mail:send'))
    return 'the password sends mail, and this access token was not granted the mail:send scope'
  if (ctx.sandbox && !order.sandbox)
    return 'the password sends real mail, and this caller is a sandbox key (or a token granted with one): it may read the passwords of sandbox orders only'
  if (ctx.policy && !order.policy)
    return 'the password sends mail without a send policy, and this caller is held to one: it may read the passwords of orders with a send policy only'
  return undefined
}

/** The active orders of the caller's account. */
export async function activeOrders(ctx: ToolContext): Promise<MailOrder[]> {
  return (await ctx.store.orders.list(accountOf(ctx))).filter((o) => o.status === 'active')
}

/** The caller's send policy as the pipeline takes it, or undefined when none applies (docs/approval.md). */
export const boundPolicy = (ctx: ToolContext): BoundPolicy | undefined =>
  ctx.holder && ctx.policy ? { holder: ctx.holder, rules: ctx.policy } : undefined

/**
 * Builds an API send's MIME message and submits it through the one pipeline: its transaction id,
 * its hold if it waits for approval, and its Message-ID.
 */
export async function sendComposed(
  ctx: ToolContext,
  order: MailOrder,
  input: Omit<ComposeInput, 'txid' | 'date'>,
  options: { list?: boolean } = {},
): Promise<Submitted & { messageId: string }> {
  const txid = ctx.relay.newTxid()
  const composed = composeMessage({ ...input, txid, date: new Date(ctx.clock()) })
  const { hold } = await ctx.relay.submit({
    order,
    txid,
    envFrom: input.from.address,
    recipients: composed.recipients,
    recipientFields: input.cc?.length || input.bcc?.length ? recipientFieldsOf(input) : undefined,
    headerFrom: input.from.address,
    replyTo: input.replyTo?.[0]?.address ?? null,
    subject: composed.subject,
    messageId: composed.messageId,
    raw: [composed.raw],
    origin: ctx.origin,
    transtype: 'HTTP',
    interface: 'api',
    sandbox: ctx.sandbox,
    policy: boundPolicy(ctx),
    list: options.list,
  })
  return { txid, hold, messageId: composed.messageId }
}

/** The field each recipient of a send came from: the first that names it, as the envelope keeps it. */
function recipientFieldsOf(input: Pick<ComposeInput, 'to' | 'cc' | 'bcc'>): Map<string, string> {
  const fields = new Map<string, string>()
  for (const [field, boxes] of [
    ['bcc', input.bcc],
    ['cc', input.cc],
    ['to', input.to],
  ] as const) {
    for (const box of boxes ?? []) fields.set(box.address.toLowerCase(), field)
  }
  return fields
}

/** Exactly one checked address (the `from` of a send). */
export function singleAddress(field: string, value: Parameters<typeof toMailboxes>[1]): Mailbox {
  const boxes = toMailboxes(field, value)
  if (boxes.length !== 1) throw badInput(`${field}: expected exactly one address, got ${boxes.length}`)
  return boxes[0]
}

export const ok = (text: string) => ({ status: 'ok', text })

/** What every send's description ends with: what it sends, and what it returns (docs/api.md#the-sandbox, docs/approval.md). */
export const SENDS_AND_RETURNS =
  "Sends real mail (none with a sandbox key or order), once per idempotency key. Returns `text`: the transaction id (viewMailLog's `mailid`); `status` is `held` when the send policy makes it wait for a person's approval (`approvalUrl`, `expiresAt`, `reason`)."

export const utcDate = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** `YYYY-MM-DD HH:MM:SS` in UTC, the contract's `created` format. */
export const utcDateTime = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ')
