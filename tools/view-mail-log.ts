// English only: the package's root loads its sixteen locales (266 modules) for the same parse.
import * as chrono from 'chrono-node/en'
import { isIP } from 'node:net'
import { z } from 'zod'
import { badInput } from '../errors.js'
import type { LogRow } from '../storage/store.js'
import { defineTool } from './define.js'
import { resolveOrder, utcDateTime } from './common.js'
import { DateOrTimestamp, Email, HeaderText, MailLog, type MailLogEntry, OrderId } from './schemas.js'

export const viewMailLog = defineTool({
  name: 'viewMailLog',
  title: 'Search the delivery log',
  http: { method: 'GET', path: '/mail/log' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Searches the delivery log, newest first; pass a send's `text` as `mailid` to see how it went. A row is " +
    'one recipient (one message with groupby=message): `id` is the transaction id, `delivered` 1 once ' +
    'delivered (0: queued, deferred, failed, or held for approval or rejected, which `response` says), `code`, ' +
    "`response` and `mxHostname` the destination's last answer; `sandbox`: never sent. Filters combine, all " +
    'exact but messageId. `total` counts all matches; page with skip and limit.',
  input: z.object({
    id: OrderId.optional(),
    origin: z
      .string()
      .refine((s) => isIP(s) !== 0, 'must be an IPv4 or IPv6 address')
      .optional()
      .describe('Client IP the message came from.'),
    mx: z.string().max(255).optional().describe('MX host delivery was tried at.'),
    from: Email.optional().describe('Envelope sender.'),
    to: Email.optional().describe('Envelope recipient.'),
    subject: HeaderText.optional(),
    mailid: z.string().min(18).max(19).optional().describe("Transaction id (a send's `text`)."),
    messageId: HeaderText.regex(/^[^\x00-\x1f\x7f]*$/, 'must not contain control characters')
      .optional()
      .describe('Part of the Message-ID, any case.'),
    replyto: Email.optional().describe('Reply-To header address.'),
    headerfrom: Email.optional().describe('From header address.'),
    delivered: z.literal([0, 1]).optional().describe('1: delivered; 0: not (yet).'),
    skip: z.number().int().min(0).max(2_147_483_647).default(0),
    limit: z.number().int().min(1).max(10000).default(100),
    startDate: DateOrTimestamp.optional().describe(
      'Rows accepted at or after: Unix seconds or a date such as 2024-01-15 or "yesterday" (UTC).',
    ),
    endDate: DateOrTimestamp.optional().describe(
      'Rows accepted at or before, as startDate; a date alone means its end.',
    ),
    sort: z.enum(['time']).default('time'),
    dir: z.enum(['asc', 'desc']).default('desc'),
    groupby: z.enum(['message', 'recipient']).default('recipient'),
  }),
  output: MailLog,
  handler: async (input, ctx) => {
    const now = ctx.clock()
    const startTime =
      input.startDate === undefined ? undefined : toEpochSeconds('startDate', input.startDate, 'start', now)
    const endTime = input.endDate === undefined ? undefined : toEpochSeconds('endDate', input.endDate, 'end', now)
    // A canceled order's history stays readable.
    const order = await resolveOrder(ctx, input.id, { allowCanceled: true })
    const { total, rows } = await ctx.store.mail.log({
      orderId: order.id,
      origin: input.origin,
      mx: input.mx,
      from: input.from,
      to: input.to,
      subject: input.subject,
      mailid: input.mailid?.toLowerCase(),
      messageId: input.messageId,
      replyto: input.replyto,
      headerfrom: input.headerfrom,
      delivered: input.delivered,
      startTime,
      endTime,
      skip: input.skip,
      limit: input.limit,
      dir: input.dir,
      groupby: input.groupby,
    })
    return { total, skip: input.skip, limit: input.limit, emails: rows.map(logEntry) }
  },
})

/**
 * A log row as the contract writes it, its fields in the contract's order: `created` as
 * `YYYY-MM-DD HH:MM:SS` UTC, `user` as the order's SMTP username, `lockTime` as epoch ms in text,
 * `queued` as ISO 8601.
 */
function logEntry(r: LogRow): z.input<typeof MailLogEntry> {
  return {
    _id: r._id,
    id: r.id,
    from: r.from,
    to: r.to,
    subject: r.subject,
    messageId: r.messageId,
    created: utcDateTime(r.createdAt),
    time: r.time,
    user: `mb${r.orderId}`,
    transtype: r.transtype,
    origin: r.origin,
    interface: r.interface,
    sendingZone: r.sendingZone,
    bodySize: r.bodySize,
    seq: r.seq,
    delivered: r.delivered,
    code: r.code,
    recipient: r.recipient,
    domain: r.domain,
    locked: r.locked,
    lockTime: r.lockTime === null ? null : String(r.lockTime),
    assigned: r.assigned,
    queued: new Date(r.queued).toISOString(),
    mxHostname: r.mxHostname,
    response: r.response,
    ...(r.sandbox ? { sandbox: true } : {}),
  }
}

/** The longest date in words taken ("last monday 10:00 UTC" is 21 characters). */
const MAX_DATE_TEXT = 100

/**
 * A DateOrTimestamp as epoch seconds. A date without a time of day means the start of that day
 * for `startDate` and its last second for `endDate`, so `endDate=2024-01-15` includes the 15th.
 */
export function toEpochSeconds(field: string, value: number | string, edge: 'start' | 'end', now: number): number {
  if (typeof value === 'number') return value
  // The parser tries pattern after pattern over the whole text: a date in words is short.
  if (value.length > MAX_DATE_TEXT) throw badInput(`${field}: at most ${MAX_DATE_TEXT} characters`)
  const parsed = chrono.parse(value, { instant: new Date(now), timezone: 'UTC' }, { forwardDate: false })[0]
  // The whole text must be the date: "2024-01-15 garbage" is not silently read as the 15th.
  if (parsed?.index !== 0 || parsed.text.length !== value.trim().length)
    throw badInput(`${field}: "${value}" is not a date or a Unix timestamp`)
  const start = parsed.start
  const date = start.date()
  if (!start.isCertain('hour')) {
    date.setUTCHours(edge === 'start' ? 0 : 23, edge === 'start' ? 0 : 59, edge === 'start' ? 0 : 59, 0)
  }
  return Math.floor(date.getTime() / 1000)
}
