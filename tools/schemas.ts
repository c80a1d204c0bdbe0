import { z } from 'zod'
import { EMAIL_PATTERN, isAddressLiteral, notAnEmail } from '../relay/addresses.js'
import { MAX_HEADER_TEXT } from '../relay/message.js'

// Shared schemas of the contract, named as in the upstream OpenAPI document. A schema a tool uses
// more than once carries its name as a title: MCP writes it once, in the tool's `$defs`.

export const GenericResponse = z.object({
  status: z.string().describe('Always "ok" on success.'),
  text: z.string().describe('The transaction id of a send, the id of a new rule, or a confirmation.'),
})

/** What a send answers: queued (`ok`), or stored and waiting for a person's approval (`held`, docs/approval.md). */
export const SendResponse = GenericResponse.extend({
  status: z.string().describe('"ok": queued; "held": stored, and sent only once a person approves it.'),
  approvalUrl: z.string().optional().describe('held: the console page where a person approves or rejects it.'),
  expiresAt: z.string().optional().describe('held: when it is rejected unless decided (ISO 8601).'),
  reason: z.string().optional().describe('held: why it needs approval.'),
})

export const OrderId = z.number().int().min(1).describe('Mail order id (getMailOrders); default: the first active one.')

/** A mail order as its SMTP username names it. */
export const Username = z.string().regex(/^mb\d+$/, 'must be an SMTP username like mb123')

export const MailOrder = z.object({
  id: z.number().int().describe('Numeric mail order id.'),
  status: z.enum(['active', 'canceled']).describe('Only active orders can send.'),
  username: z
    .string()
    .regex(/^mb\d+$/)
    .describe('SMTP AUTH username, always mb<id>.'),
  comment: z.string().optional().describe('Note on the order, present when not empty.'),
  sandbox: z.boolean().optional().describe('True for a sandbox order, whose mail never leaves.'),
  list: z.boolean().optional().describe('True for a bulk order, whose mail gets a one-click unsubscribe link.'),
})

/** What a withheld password reads as: the contract's field is a string, always present. */
export const WITHHELD_PASSWORD = '********'

export const MailOrderDetail = MailOrder.extend({
  password: z.string().describe(`Current SMTP AUTH password of the order ("${WITHHELD_PASSWORD}" if withheld).`),
  passwordWithheld: z.string().optional().describe('Why the password is withheld from this caller.'),
})

/**
 * An email address as every door takes it (relay/addresses.ts: RFC 5321 dot-atom or quoted local
 * part), so that an address the relay accepted over SMTP, such as `info+tag=1@example.org`, is
 * also accepted where a tool asks for one (zod's own email pattern refuses `=`, `&` and others).
 */
export const Email = emailOf()

/** An {@link Email} whose refusal of a text that is not an address can say what to do instead (`otherwise`). */
export function emailOf(otherwise: (input: string) => string | undefined = () => undefined) {
  return z
    .email({
      pattern: EMAIL_PATTERN,
      // An address literal is named as such (zod's own words otherwise).
      error: (issue) => {
        if (typeof issue.input !== 'string') return undefined
        return isAddressLiteral(issue.input) ? `"${issue.input}" ${notAnEmail(issue.input)}` : otherwise(issue.input)
      },
    })
    .max(254)
}

/** A header's text (a subject, a name, a Message-ID to search for), as long as a header line may be (RFC 5322 §2.1.1). */
export const HeaderText = z.string().max(MAX_HEADER_TEXT)

export const EmailAddressName = z
  .object({
    email: Email,
    name: HeaderText.optional().describe('Display name.'),
  })
  .meta({ title: 'EmailAddressName' })

/** A single address: `a@b`, `Name <a@b>`, or a contact object. */
export const EmailAddressTypes = z.union([
  z.string().min(1).describe('An address or "Name <address>".'),
  EmailAddressName,
])

/** An address list: a comma-separated RFC 822 string, or an array of contact objects. */
export const EmailAddressesTypes = z
  .union([
    z.string().min(1).describe('Comma-separated addresses, bare or "Name <address>".'),
    z.array(EmailAddressName).min(1),
  ])
  .meta({ title: 'EmailAddressesTypes' })

export const MailAttachment = z.object({
  filename: HeaderText.optional().describe('Name shown to recipients; default "attachment".'),
  data: z.base64(),
})

/** An epoch-seconds integer or a natural-language date (UTC). */
export const DateOrTimestamp = z
  .union([z.number().int().min(0).max(9999999999), z.string().min(1)])
  .describe('Unix timestamp in seconds, or a date such as 2024-01-15, "yesterday" or "last monday" (UTC).')

export const RuleType = z.enum(['domain', 'email', 'startswith', 'destination'])

export const DenyRuleRecord = z.object({
  id: z.string().describe('Rule id (numeric text); the ruleId for deleteRule.'),
  user: z.string().describe('SMTP username of the order the rule belongs to.'),
  type: RuleType.describe('What the rule matches.'),
  data: z.string().describe('The value matched.'),
  created: z.string().describe('Creation time, YYYY-MM-DD HH:MM:SS UTC.'),
})

const nullable = <T extends z.ZodType>(t: T) => t.nullable()

export const MailLogEntry = z.object({
  _id: z.number().int().describe('Row id; defines chronological order. Not the mailid.'),
  id: z.string().describe('Transaction id (18-19 hex characters), the mailid filter.'),
  from: z.string().describe('Envelope sender.'),
  to: z.string().describe('Envelope recipient (groupby=message: all recipients, comma-separated).'),
  subject: nullable(z.string()),
  messageId: nullable(z.string()),
  created: z.string().describe('YYYY-MM-DD HH:MM:SS UTC.'),
  time: z.number().int().describe('Unix time of acceptance, seconds.'),
  user: z.string().describe('SMTP username mb<id>.'),
  transtype: z.string().describe('ESMTPSA, ESMTPA or HTTP.'),
  origin: z.string().describe('Client IP address.'),
  interface: z.string().describe('feeder (SMTP) or api.'),
  sendingZone: nullable(z.string()),
  bodySize: nullable(z.number().int()),
  seq: nullable(z.number().int()),
  delivered: nullable(z.number().int()).describe('1 delivered; 0 queued, deferred, failed, held or rejected.'),
  code: nullable(z.number().int()).describe('Last SMTP reply code from the destination.'),
  recipient: nullable(z.string()),
  domain: nullable(z.string()),
  locked: nullable(z.number().int()),
  lockTime: nullable(z.string()),
  assigned: nullable(z.string()),
  queued: nullable(z.string()),
  mxHostname: nullable(z.string()),
  response: nullable(z.string()),
  sandbox: z.boolean().optional(),
})

export const MailLog = z.object({
  total: z.number().int().describe('Rows matching the filters, after grouping.'),
  skip: z.number().int(),
  limit: z.number().int(),
  emails: z.array(MailLogEntry),
})

export const STATS_WINDOWS = ['all', 'billing', 'month', '7d', '24h', 'day', '1h'] as const

const Counts = z.record(z.string(), z.number().int())

export const MailStatsType = z.object({
  time: z.enum(STATS_WINDOWS).describe('The window of received, sent and volume.'),
  usage: z.number().int().describe('Messages accepted in the current billing cycle.'),
  currency: z.string(),
  cost: z.number().describe('Base price plus per-message charges for the current billing cycle.'),
  received: z.number().int(),
  sent: z.number().int(),
  volume: z
    .object({ to: Counts, from: Counts, ip: Counts })
    .describe('Top 500 recipients, envelope senders and client IPs in the window.'),
})

export const MailBlockEvent = z
  .object({
    date: z.string().describe('YYYY-MM-DD (UTC).'),
    from: z.string().describe('Envelope sender; pass it to delistBlock.'),
    messageId: nullable(z.string()),
    subject: z.string(),
    to: z.string().describe('The recipients of the blocked message.'),
  })
  .meta({ title: 'MailBlockEvent' })

export const MailBlockSubject = z.object({ from: z.string(), subject: z.string() })

/** The send tools' `list`: bulk mail, with a one-click unsubscribe link (docs/sending-domains.md#one-click-unsubscribe). */
export const ListFlag = z
  .boolean()
  .optional()
  .describe(
    'Bulk mail (a newsletter, an announcement): it gets a one-click unsubscribe link (List-Unsubscribe, RFC 8058) for its one recipient, who is suppressed when it is used. Default: transactional mail, no link; an order created with list sends only bulk mail.',
  )

export const MailBlocks = z.object({
  local: z.array(MailBlockEvent).describe('LOCAL_BL_RCPT events of the last 5 days.'),
  mbtrap: z.array(MailBlockEvent).describe('MBTRAP events of the last 5 days.'),
  subject: z.array(MailBlockSubject).describe('Senders over the spam-subject threshold in the last 3 days.'),
  unsubscribed: z
    .array(
      z.object({
        date: z.string().describe('YYYY-MM-DD, UTC.'),
        to: z.string().describe('The recipient who unsubscribed.'),
        mailid: z.string().nullable().describe('The message whose link was used (getMessage id).'),
      }),
    )
    .optional()
    .describe(
      "Recipients who used a one-click unsubscribe link in the last 5 days, newest first, at most 1000 (mailroom's; always present).",
    ),
})
