import { z } from 'zod'
import { notFound } from '../errors.js'
import type { AttemptRecord, Hold, MessageHistory, RecipientHistory } from '../storage/store.js'
import { accountOf, defineTool } from './define.js'
import { MailMessage, type TimelineEntry } from './history-schemas.js'

type Entry = z.input<typeof TimelineEntry>

const iso = (ms: number) => new Date(ms).toISOString()

/** The fields of an entry that is not an attempt on a connection (a test of the timeline reads them too). */
export const NO_ATTEMPT = {
  mxHostname: null,
  mxAddress: null,
  tls: null,
  tlsPolicy: null,
  tlsPolicyDomain: null,
  certValid: null,
  code: null,
  response: null,
  nextAttemptAt: null,
}

export const getMessage = defineTool({
  name: 'getMessage',
  title: "One message's story",
  http: { method: 'GET', path: '/mail/log/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "One message of the account by transaction id (a send's `text`, the log's `id`): envelope, headers, " +
    'size, door, and per recipient its status and timeline (accepted; held, approved or rejected when a send ' +
    'policy held it, see `hold`; each delivery attempt with MX host, address, TLS, MTA-STS policy, ' +
    'certificate validity and reply; suppressed when ' +
    'a bounce put the address on the suppression list). 404 if none.',
  input: z.object({
    id: z
      .string()
      .regex(/^[0-9a-fA-F]{18,19}$/, 'must be a transaction id: 18 or 19 hex characters')
      .describe('Transaction id.'),
  }),
  output: MailMessage,
  handler: async ({ id }, ctx) => {
    const message = await ctx.store.mail.message(id.toLowerCase(), accountOf(ctx))
    if (!message) throw notFound(`id: message ${id} not found`)
    return messageOf(message)
  },
})

function messageOf(m: MessageHistory): z.input<typeof MailMessage> {
  return {
    id: m.txid,
    orderId: m.orderId,
    user: `mb${m.orderId}`,
    from: m.envFrom,
    headerFrom: m.headerFrom,
    replyTo: m.replyTo,
    subject: m.subject,
    messageId: m.messageId,
    size: m.bodySize,
    origin: m.origin,
    interface: m.interface,
    transtype: m.transtype,
    createdAt: iso(m.createdAt),
    ...(m.sandbox ? { sandbox: true } : {}),
    ...(m.hold ? { hold: holdOf(m.hold) } : {}),
    recipients: m.recipients.map((r) => ({
      recipient: r.recipient,
      status: r.state,
      // Put there by this message, and there still (it may have been delisted since).
      suppressed: r.listed && (r.history.some((a) => a.suppressed) || Boolean(r.listedBy)),
      nextAttemptAt: r.nextAttemptAt === null ? null : iso(r.nextAttemptAt),
      attempts: r.attempts,
      timeline: timelineOf(m.createdAt, r, m.hold ?? null),
    })),
  }
}

/** Who may decide a held message (docs/approval.md): never a caller held to a send policy. */
const APPROVER = 'a person: the console with a key without a send policy, or `mailroom approvals`'

const holdOf = (h: Hold) => ({
  status: h.status,
  reason: h.reason,
  holder: h.holderLabel,
  approver: APPROVER,
  approvalUrl: h.approvalUrl,
  expiresAt: iso(h.expiresAt),
  decidedAt: h.decidedAt === null ? null : iso(h.decidedAt),
  decidedBy: h.decidedBy,
})

/**
 * Accepted; held and its decision when a send policy held it; then each attempt in order, a
 * suppression right after the failure that caused it.
 */
function timelineOf(acceptedAt: number, r: RecipientHistory, hold: Hold | null): Entry[] {
  const entries: Entry[] = [{ time: iso(acceptedAt), event: 'accepted', ...NO_ATTEMPT }]
  if (hold) {
    entries.push({
      time: iso(hold.createdAt),
      event: 'held',
      ...NO_ATTEMPT,
      response: `held for approval by ${hold.holderLabel}'s send policy: ${hold.reason}; until ${iso(hold.expiresAt)}`,
    })
    if (hold.status !== 'held' && hold.decidedAt !== null)
      entries.push({
        time: iso(hold.decidedAt),
        event: hold.status,
        ...NO_ATTEMPT,
        response: `${hold.status} by ${hold.decidedBy ?? 'a person'}`,
      })
  }
  for (const a of r.history) {
    entries.push(attemptEntry(a))
    if (a.suppressed)
      entries.push({
        time: iso(a.time),
        event: 'suppressed',
        ...NO_ATTEMPT,
        response: `${r.recipient} was put on this account's suppression list: sends to it are refused until it is delisted`,
      })
  }
  // Put there by this message without a failure: its unsubscribe link was used, or a complaint came back about it.
  if (r.listedBy && !r.history.some((a) => a.suppressed))
    entries.push({
      time: iso(r.listedBy.time),
      event: 'suppressed',
      ...NO_ATTEMPT,
      response: `${r.recipient} was put on this account's suppression list (${r.listedBy.reason}): sends to it are refused until it is delisted`,
    })
  return entries
}

const attemptEntry = (a: AttemptRecord): Entry => ({
  time: iso(a.time),
  event: a.state,
  mxHostname: a.mxHostname,
  mxAddress: a.mxAddress,
  tls: a.tls,
  tlsPolicy: a.tlsPolicy,
  tlsPolicyDomain: a.tlsPolicyDomain,
  certValid: a.certValid,
  code: a.code,
  response: a.response,
  nextAttemptAt: a.nextAttemptAt === null ? null : iso(a.nextAttemptAt),
})
