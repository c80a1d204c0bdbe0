import { z } from 'zod'

// Schemas of getMessage and getVolume: extensions beyond the hosted service's contract, kept short
// (every MCP client reads them in its tool list). Times are ISO 8601 in UTC.

const Iso = z.string()
const orNull = <T extends z.ZodType>(t: T) => t.nullable()

export const TimelineEntry = z.object({
  time: Iso,
  event: z.enum(['accepted', 'held', 'approved', 'rejected', 'deferred', 'delivered', 'failed', 'suppressed']),
  mxHostname: orNull(z.string()),
  mxAddress: orNull(z.string()),
  tls: orNull(z.boolean()),
  tlsPolicy: orNull(z.enum(['none', 'testing', 'enforce'])).describe("the recipient domain's MTA-STS mode applied"),
  tlsPolicyDomain: orNull(z.string()),
  certValid: orNull(z.boolean()).describe("the MX certificate was valid for the MX host's name; null without TLS"),
  code: orNull(z.number().int()),
  response: orNull(z.string()),
  nextAttemptAt: orNull(Iso).describe('deferred: when it is tried again'),
})

export const MailMessage = z.object({
  id: z.string(),
  orderId: z.number().int(),
  user: z.string(),
  from: z.string(),
  headerFrom: orNull(z.string()),
  replyTo: orNull(z.string()),
  subject: orNull(z.string()),
  messageId: orNull(z.string()),
  size: z.number().int(),
  origin: z.string(),
  interface: z.string(),
  transtype: z.string(),
  createdAt: Iso,
  sandbox: z.boolean().optional(),
  /** Only for a message held for approval (docs/approval.md). */
  hold: z
    .object({
      status: z.enum(['held', 'approved', 'rejected']),
      reason: z.string(),
      holder: z.string().describe('Whose send policy held it.'),
      approver: z.string().describe('Who may decide it.'),
      approvalUrl: z.string(),
      expiresAt: Iso,
      decidedAt: orNull(Iso),
      decidedBy: orNull(z.string()),
    })
    .optional(),
  recipients: z.array(
    z.object({
      recipient: z.string(),
      status: z.enum(['queued', 'deferred', 'delivered', 'failed', 'held', 'rejected']),
      suppressed: z.boolean(),
      nextAttemptAt: orNull(Iso),
      attempts: z.number().int(),
      timeline: z.array(TimelineEntry),
    }),
  ),
})

const Counts = {
  accepted: z.number().int(),
  delivered: z.number().int(),
  deferred: z.number().int(),
  failed: z.number().int(),
  refused: z.number().int(),
}

export const MailVolume = z.object({
  interval: z.enum(['hour', 'day']),
  startTime: Iso,
  endTime: Iso,
  buckets: z.array(z.object({ time: Iso, ...Counts })),
  totals: z.object(Counts),
})
