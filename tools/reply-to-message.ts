import { z } from 'zod'
import { badInput, MailroomError, notFound } from '../errors.js'
import type { Mailbox } from '../relay/addresses.js'
import { toMailboxes } from '../relay/addresses.js'
import { senderAuthorized } from '../relay/deny-rules.js'
import { htmlToText } from '../relay/message.js'
import type { InboundAddress, InboundMessage, MailOrder } from '../storage/store.js'
import { activeOrders, resolveOrder, sendComposed } from './common.js'
import { accountOf, defineTool, type ToolContext } from './define.js'
import { InboundId } from './inbound-schemas.js'
import { sendAnswer } from './held.js'
import { OrderId, SendResponse } from './schemas.js'

export const replyToMessage = defineTool({
  name: 'replyToMessage',
  title: 'Answer a received message',
  http: { method: 'POST', path: '/inbound/{id}/reply', bodyTypes: ['application/json'], message: true },
  errors: [400, 403, 404, 409, 422, 429],
  idempotencyKey: true,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description:
    'Answers a received message from the inbox that got it, in its thread: to its Reply-To or From (replyAll: ' +
    'and the other recipients), `Re:` subject, In-Reply-To and References set. Refuses an automatic message ' +
    '(auto-reply, list, bounce) unless `force`. Returns `text`: the transaction id; `status` `held` when the ' +
    "send policy makes it wait for a person's approval.",
  input: z.object({
    id: InboundId,
    text: z.string().optional().describe('Plain-text body.'),
    html: z.string().optional().describe('HTML body.'),
    replyAll: z.boolean().default(false).describe('Also to the other To and Cc recipients.'),
    force: z.boolean().default(false).describe('Answer even an automatic message.'),
    order: OrderId.optional(),
  }),
  output: SendResponse,
  handler: async (input, ctx) => {
    const accountId = accountOf(ctx)
    if (input.text === undefined && input.html === undefined) throw badInput('text: give text, html or both')
    const m = await ctx.store.inbound.get(input.id, accountId)
    if (!m) throw notFound(`id: received message ${input.id} not found`)
    // RFC 3834 §2: an automatic message is not answered automatically, or two robots answer each other forever.
    if (m.automatic && !input.force)
      throw badInput(
        `id: message ${m.id} is automatic (${m.automatic}); answering it could start a mail loop. Set force to answer it anyway`,
      )
    const from: Mailbox = { name: '', address: m.inbox }
    const { to, cc } = recipientsOf(m, input.replyAll)
    const order = await orderFor(ctx, input.order, m.inbox)
    const parent = m.messageId && /^[^\s<>]+$/.test(m.messageId) ? `<${m.messageId}>` : undefined
    const references = m.references.filter((r) => /^[^\s<>]+$/.test(r)).map((r) => `<${r}>`)
    const body = input.text ?? htmlToText(input.html!)
    const sent = await sendComposed(ctx, order, {
      from,
      to,
      cc,
      subject: replySubject(m.subject),
      body,
      ...(input.html === undefined ? { plain: true } : { html: input.html }),
      ...(parent ? { inReplyTo: parent, references: [...references, parent] } : {}),
    })
    await ctx.store.inbound.linkSent({ accountId, messageId: sent.messageId, threadId: m.threadId })
    return sendAnswer(ctx, sent, body)
  },
})

/** `Re: ` once, before the subject without the ones it has (RFC 5322 §3.6.5). */
export const replySubject = (subject: string | null) => `Re: ${(subject ?? '').replace(/^(\s*re\s*:\s*)+/i, '')}`

/** Who an answer goes to: the Reply-To or else the From; with replyAll, the other To and Cc too, never the inbox itself. */
function recipientsOf(m: InboundMessage, replyAll: boolean): { to: Mailbox[]; cc: Mailbox[] } {
  const boxes = (field: string, list: InboundAddress[]) =>
    list.length
      ? toMailboxes(
          field,
          list.map((a) => ({ email: a.address, name: a.name })),
        )
      : []
  const to = boxes('to', m.replyTo.length ? m.replyTo : m.from ? [m.from] : [])
  if (to.length === 0) throw badInput(`id: message ${m.id} has no From or Reply-To address to answer`)
  if (!replyAll) return { to, cc: [] }
  const seen = new Set([m.inbox, ...to.map((b) => b.address)].map((a) => a.toLowerCase()))
  const cc = boxes('cc', [...m.to, ...m.cc]).filter((b) => {
    const address = b.address.toLowerCase()
    if (seen.has(address)) return false
    seen.add(address)
    return true
  })
  return { to, cc }
}

/**
 * The order an answer is sent under: the one asked for, or else the first active order whose
 * senders allow the inbox's address (an order of no senders allows any).
 */
async function orderFor(ctx: ToolContext, id: number | undefined, inbox: string): Promise<MailOrder> {
  if (id !== undefined) return resolveOrder(ctx, id)
  const orders = await activeOrders(ctx)
  const order = orders.find((o) => senderAuthorized(o.senders, inbox))
  if (order) return order
  if (orders.length === 0) throw notFound('this account has no active mail order')
  throw new MailroomError(
    400,
    `from: no active mail order of this account may send as ${inbox}; add it (or @${inbox.split('@')[1]}) to an order's senders`,
  )
}
