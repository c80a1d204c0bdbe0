/**
 * Reports to senders (RFC 3464 delivery status notifications): when a recipient fails for good,
 * or is still deferred past MAILROOM_DELAY_WARNING, the message's envelope sender gets a
 * `multipart/report` from the null sender, queued and delivered like any message.
 */
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import {
  joinPieces,
  type AttemptOutcome,
  type NewMessage,
  type QueueItem,
  type SenderReport,
  type Store,
} from '../storage/store.js'
import { signMessage } from './dkim.js'
import { dateHeader, header, multipart, newMessageId, textPart } from './message.js'
import { cut } from './smtp-session.js'

/** The local part reports come from (RFC 5321 §4.5.5: sent with a null reverse-path). */
const MAILER_DAEMON = 'MAILER-DAEMON'
/** The address reports come from: the From header, and the domain whose key signs them. */
const reportSender = (nodeName: string) => `${MAILER_DAEMON}@${nodeName}`
/** Characters of a reply quoted in a report: its lines stay well within 998 (RFC 5322 §2.1.1). */
const MAX_DIAGNOSTIC = 900
/** Most bytes of the original read for its header block. */
const MAX_HEAD = 256 * 1024

const SUBJECTS = {
  failed: 'Undelivered Mail Returned to Sender',
  delayed: 'Delayed Mail (still being retried)',
}

/** One recipient as a report tells of it: its last attempt's outcome. */
export type ReportedRecipient = Pick<AttemptOutcome, 'code' | 'response' | 'mxHostname'> & { recipient: string }

export interface ReportInput {
  action: 'failed' | 'delayed'
  nodeName: string
  /** The report's own transaction id (in its Message-ID). */
  txid: string
  original: { txid: string; envFrom: string; queuedAt: number; headers: Buffer }
  recipients: ReportedRecipient[]
  now: number
  /** When a delayed recipient is given up on (Will-Retry-Until). */
  retryUntil: number
}

/**
 * The report as a message: a short explanation, the `message/delivery-status` part (RFC 3464
 * §2: per-message fields, then a group of fields per recipient) and the original's header block
 * as `text/rfc822-headers` (RFC 6522 §4), under `multipart/report; report-type=delivery-status`.
 */
export function composeReport(input: ReportInput): { raw: Buffer; messageId: string; subject: string } {
  const from = reportSender(input.nodeName)
  const messageId = newMessageId(input.txid, from)
  const subject = SUBJECTS[input.action]
  const headers = [
    header('From', `Mail Delivery System <${from}>`),
    header('To', input.original.envFrom),
    header('Subject', subject),
    `Message-ID: ${messageId}\r\n`,
    `Date: ${dateHeader(new Date(input.now))}\r\n`,
    // RFC 3834 §5: an automatic answer, which auto-responders must not answer in turn.
    'Auto-Submitted: auto-replied\r\n',
    'MIME-Version: 1.0\r\n',
  ]
  const parts = [textPart('plain', explanation(input)), deliveryStatus(input)]
  if (input.original.headers.length)
    parts.push(`Content-Type: text/rfc822-headers\r\n\r\n${input.original.headers.toString('latin1')}`)
  const boundary = `--_mailroom-report-${input.txid}`
  // Every part is ASCII but the original's header block, which is kept byte for byte (latin1).
  const raw = Buffer.from(
    headers.join('') + multipart('report; report-type=delivery-status', boundary, parts),
    'latin1',
  )
  return { raw, messageId, subject }
}

/** The human part: what happened, then each recipient with the reply that decided it. */
function explanation(input: ReportInput): string {
  const lead =
    input.action === 'failed'
      ? 'Your message could not be delivered to the recipients below, and will not be tried again.'
      : `Your message has not been delivered yet to the recipients below. It is still being tried, until ${dateHeader(new Date(input.retryUntil))}; you need do nothing.`
  const lines = input.recipients.map((r) => `<${r.recipient}>: ${diagnostic(r)}`)
  return `This is the mail system at ${input.nodeName}.\n\n${lead}\nThe delivery status report and the headers of your message are attached.\n\n${lines.join('\n')}\n`
}

/** The `message/delivery-status` part (RFC 3464 §2.2 and §2.3). */
function deliveryStatus(input: ReportInput): string {
  const date = (ms: number) => dateHeader(new Date(ms))
  const perMessage = [
    `Reporting-MTA: dns; ${input.nodeName}`,
    `X-Mailroom-Transaction: ${input.original.txid}`,
    `Arrival-Date: ${date(input.original.queuedAt)}`,
  ]
  const perRecipient = input.recipients.map((r) =>
    [
      `Final-Recipient: rfc822; ${r.recipient}`,
      `Action: ${input.action}`,
      `Status: ${status(input.action, r)}`,
      ...(r.mxHostname ? [`Remote-MTA: dns; ${r.mxHostname}`] : []),
      // RFC 3464 §2.3.6: `smtp` for a reply from a server; an extension type for what was not one.
      `Diagnostic-Code: ${r.code === null ? 'X-mailroom' : 'smtp'}; ${diagnostic(r)}`,
      `Last-Attempt-Date: ${date(input.now)}`,
      ...(input.action === 'delayed' ? [`Will-Retry-Until: ${date(input.retryUntil)}`] : []),
    ]
      .map(fold)
      .join(''),
  )
  return `Content-Type: message/delivery-status\r\n\r\n${[perMessage.map(fold).join(''), ...perRecipient].join('\r\n')}`
}

/** A field folded at 76 characters, CRLF-terminated. */
const fold = (line: string) => header(line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2))

/** An enhanced status code (RFC 3463) at the start of a reply, after its code when it has one. */
const ENHANCED = /^(?:\d{3}[ -])?([245])\.(\d{1,3})\.(\d{1,3})\b/

/**
 * The recipient's status (RFC 3464 §2.3.4): the reply's enhanced code when its class agrees with
 * the action, else 5.0.0 for a refusal, 4.4.7 (delivery time expired, RFC 3463) for a recipient
 * given up on after temporary failures, 4.0.0 for one still being tried.
 */
export function status(action: 'failed' | 'delayed', r: Pick<AttemptOutcome, 'code' | 'response'>): string {
  const refused = r.code !== null && r.code >= 500
  const m = ENHANCED.exec(r.response)
  if (m && (m[1] === '5') === refused && (action === 'failed' || m[1] === '4')) return `${m[1]}.${m[2]}.${m[3]}`
  if (action === 'delayed') return '4.0.0'
  return refused ? '5.0.0' : '4.4.7'
}

/** A reply on one line of printable ASCII, with its code, at most MAX_DIAGNOSTIC characters. */
function diagnostic(r: Pick<AttemptOutcome, 'code' | 'response'>): string {
  const text = r.response.replace(/\s*\n\s*/g, ' ').replace(/[^\x20-\x7e]/g, '?')
  const withCode = r.code === null || text.startsWith(String(r.code)) ? text : `${r.code} ${text}`
  return cut(withCode, MAX_DIAGNOSTIC)
}

/** A message's header block (up to the blank line that ends it), with CRLF line ends. */
export function headerBlock(raw: Buffer | undefined): Buffer {
  if (!raw) return Buffer.alloc(0)
  const text = raw.subarray(0, MAX_HEAD).toString('latin1')
  const end = /\r?\n\r?\n/.exec(text)
  const block = end ? text.slice(0, end.index) : text.replace(/\r?\n$/, '')
  return Buffer.from(`${block.replace(/\r?\n/g, '\r\n')}\r\n`, 'latin1')
}

export interface ReportDeps {
  config: Pick<Config, 'nodeName' | 'reports' | 'delivery'>
  logger: Logger
  newTxid: (now: number) => string
  /** The original message's bytes: its header block goes into the report. */
  body: () => Promise<Buffer | undefined>
  /** Where the sending domains are: a report is DKIM-signed when the node's domain is one of the account's. */
  store: Store
}

/**
 * The reports that one attempt's outcomes call for, for the recipients of one message
 * (`items`, with `outcomes` in the same order): one for those that failed, one for those
 * deferred past the delay warning that were not reported delayed before. None for a message from
 * the null sender (RFC 5321 §4.5.5), which is what a report is: one that fails is only logged.
 */
export async function senderReports(
  deps: ReportDeps,
  items: QueueItem[],
  outcomes: AttemptOutcome[],
  now: number,
): Promise<SenderReport[]> {
  const { enabled, delayWarning } = deps.config.reports
  const failed = items.flatMap((_item, i) => (outcomes[i].state === 'failed' ? [i] : []))
  const delayed = items.flatMap((item, i) =>
    outcomes[i].state === 'deferred' &&
    delayWarning !== null &&
    !item.delayReported &&
    now - item.queuedAt >= delayWarning
      ? [i]
      : [],
  )
  const first = items[0]
  if (first.envFrom === '') {
    if (failed.length)
      deps.logger.warn(
        { txid: first.txid, rcpts: failed.map((i) => items[i].recipient) },
        'a message from the null sender (a report) failed: no report is sent about it',
      )
    return []
  }
  if (!enabled || (failed.length === 0 && delayed.length === 0)) return []
  const headers = headerBlock(await deps.body())
  const reports: SenderReport[] = []
  for (const [action, indexes] of [
    ['failed', failed],
    ['delayed', delayed],
  ] as const) {
    if (indexes.length === 0) continue
    const txid = deps.newTxid(now)
    const composed = composeReport({
      action,
      nodeName: deps.config.nodeName,
      txid,
      original: { txid: first.txid, envFrom: first.envFrom, queuedAt: first.queuedAt, headers },
      recipients: indexes.map((i) => ({ ...outcomes[i], recipient: items[i].recipient })),
      now,
      retryUntil: first.queuedAt + deps.config.delivery.maxQueueAge,
    })
    // From MAILER-DAEMON@<node name>: signed like any mail from that domain, when it is a sending
    // domain of the account.
    const from = reportSender(deps.config.nodeName)
    const raw = joinPieces(
      await signMessage(deps, { accountId: first.accountId, from, raw: [composed.raw], time: now, txid }),
    )
    reports.push({
      rows: indexes.map((i) => items[i].id),
      action,
      message: reportMessage(deps.config.nodeName, first, { ...composed, raw, txid }, now),
    })
  }
  return reports
}

/** A report as the queue takes it: a message of the original's account and order, from the null sender. */
function reportMessage(
  nodeName: string,
  original: QueueItem,
  report: { raw: Buffer; messageId: string; subject: string; txid: string },
  now: number,
): NewMessage {
  return {
    txid: report.txid,
    accountId: original.accountId,
    orderId: original.orderId,
    envFrom: '',
    recipients: [original.envFrom],
    headerFrom: reportSender(nodeName),
    replyTo: null,
    subject: report.subject,
    messageId: report.messageId,
    origin: nodeName,
    transtype: 'DSN',
    // What the stores know a report by: it is never billed (getStats' usage leaves it out).
    interface: 'report',
    sendingZone: 'default',
    raw: [report.raw],
    time: now,
    // A report about sandbox mail is sandbox mail: it must not leave either.
    ...(original.sandbox ? { sandbox: true } : {}),
  }
}
