import type { Logger } from 'pino'
import { joinPieces, newEventId, type DeliveryRef, type Store, type WebhookEvent } from '../../storage/store.js'
import { classify } from '../bounces.js'
import { decoded, eachLeaf, headersOf } from '../message-content.js'
import type { IntakeAnswer } from './intake.js'

/**
 * What came back to a return path (relay/return-path.ts) about the one recipient its address names:
 * a failure (a delivery status notification, RFC 3464, or a plain-text bounce), a complaint (an
 * abuse report from a feedback loop, RFC 5965), or nothing to act on (a delay notice, a report of
 * delivery, an auto-reply), and why.
 */
export type Feedback =
  | { kind: 'failed'; code: number | null; response: string }
  | { kind: 'complaint'; feedbackType: string }
  | { kind: 'none'; why: string }

/** Most bytes of a message to a return path: a report is small; more is refused (552). */
export const FEEDBACK_MAX_BYTES = 1024 * 1024
/** Characters of a report's diagnostic kept. */
const MAX_RESPONSE = 1000
/** RFC 5965 §7.3 (and RFC 6650 §5): the feedback types that say a person called the mail unwanted. */
const COMPLAINTS = new Set(['abuse', 'fraud', 'virus'])

/** The fields of a delivery-status or feedback-report body: its blocks of fields (RFC 3464 §2.1). */
const blocksOf = (text: string): Map<string, string>[] =>
  text
    .split(/\r?\n[ \t]*\r?\n/)
    .map((block) => headersOf(block))
    .filter((fields) => fields.size > 0)

/** The address of an `rfc822; user@example.com` field (RFC 3464 §2.3.2), lower case. */
const addressOf = (field: string | undefined) =>
  field
    ?.replace(/^[^;]*;\s*/, '')
    .replace(/^<|>$/g, '')
    .toLowerCase()

/** A DSN's per-recipient block about `recipient`: the one naming it, else the one failure it reports. */
function dsnFailure(text: string, recipient: string): Feedback {
  const [, ...recipients] = blocksOf(text)
  const named = recipients.find(
    (b) => addressOf(b.get('final-recipient')) === recipient || addressOf(b.get('original-recipient')) === recipient,
  )
  const block = named ?? (recipients.length === 1 ? recipients[0] : undefined)
  if (!block) return { kind: 'none', why: 'the report names no recipient of this message' }
  const action = (block.get('action') ?? '').toLowerCase()
  if (action !== 'failed') return { kind: 'none', why: `the report's action is ${action || 'missing'}, not failed` }
  const status = block.get('status') ?? ''
  // RFC 3464 §2.3.6: `smtp; 550 5.1.1 …`, or another type's text (`X-Postfix; unknown user`).
  const diagnostic = (block.get('diagnostic-code') ?? '').replace(/^[\w-]+;\s*/, '')
  const code = /^([245]\d\d)\b/.exec(diagnostic)?.[1] ?? (status.startsWith('5.') ? '550' : null)
  const response = diagnostic.includes(status) ? diagnostic : `${status} ${diagnostic}`.trim()
  return { kind: 'failed', code: code === null ? null : Number(code), response: response.slice(0, MAX_RESPONSE) }
}

/**
 * A permanent failure as a bounce's text quotes it: an SMTP reply of class 5 with its enhanced
 * status code (RFC 3463: `550 5.1.1 …`, as `#550 5.1.1` too), or qmail's `(#5.1.1)`. A bare number
 * or date (`5.12.26`) is not one.
 */
const FAILURE_LINE = /^\s*#?(5\d\d)[ -]#?5\.[0-7]\.\d{1,3}\b|\(#5\.[0-7]\.\d{1,3}\)/

/**
 * A bounce that is not a DSN (older servers write their own text): a permanent failure only when it
 * came from the null sender (RFC 5321 §4.5.5), is no auto-reply (RFC 3834 §5: `Auto-Submitted:
 * auto-replied`, as an out-of-office is) and a line of it quotes a failure (FAILURE_LINE);
 * anything else changes nothing.
 */
function plainFailure(text: string, mailFrom: string, autoSubmitted: string): Feedback {
  if (mailFrom !== '' && !/^(mailer-daemon|postmaster)@/i.test(mailFrom))
    return { kind: 'none', why: 'not a report, and not from the null sender' }
  if (/^auto-replied\b/i.test(autoSubmitted))
    return { kind: 'none', why: 'an auto-reply (Auto-Submitted: auto-replied)' }
  const line = text.split(/\r?\n/).find((l) => FAILURE_LINE.test(l))
  if (!line) return { kind: 'none', why: 'no permanent failure in the text' }
  const code = /^\s*#?(5\d\d)[ -]/.exec(line)?.[1]
  return { kind: 'failed', code: code ? Number(code) : 550, response: line.trim().slice(0, MAX_RESPONSE) }
}

/** Reads what came back to the return path of `recipient` (lower case), sent from `mailFrom`. */
export function readFeedback(raw: Buffer, mailFrom: string, recipient: string): Feedback {
  recipient = recipient.toLowerCase()
  let found: Feedback | undefined
  let text = ''
  eachLeaf(raw, (leaf) => {
    if (found) return
    const body = () => decoded(leaf.body, leaf.headers.get('content-transfer-encoding') ?? '').toString('utf8')
    if (leaf.mime === 'message/delivery-status' || leaf.mime === 'message/global-delivery-status')
      found = dsnFailure(body(), recipient)
    else if (leaf.mime === 'message/feedback-report') {
      const type = (blocksOf(body())[0]?.get('feedback-type') ?? '').toLowerCase()
      found = COMPLAINTS.has(type)
        ? { kind: 'complaint', feedbackType: type }
        : { kind: 'none', why: `a feedback report of type ${type || 'none'}, not a complaint` }
    } else if (leaf.mime === 'text/plain' && !text) text = body()
  })
  const head = raw.subarray(0, Math.max(0, raw.indexOf('\r\n\r\n'))).toString('latin1')
  return found ?? plainFailure(text, mailFrom, headersOf(head).get('auto-submitted') ?? '')
}

export interface FeedbackDeps {
  store: {
    queue: Pick<Store['queue'], 'delivery' | 'lateFailure'>
    blocks: Pick<Store['blocks'], 'addToList'>
    webhooks: Pick<Store['webhooks'], 'emit'>
  }
  clock: () => number
  logger: Logger
}

/** What a report does to the recipient it is about; a failure of a row not final yet is answered 451, to come again. */
async function apply(deps: FeedbackDeps, row: DeliveryRef, feedback: Feedback): Promise<'done' | 'later'> {
  const { store, logger } = deps
  const now = deps.clock()
  const log = { txid: row.txid, delivery: row.id, kind: feedback.kind }
  if (feedback.kind === 'none') {
    logger.info({ ...log, why: feedback.why }, 'return path: nothing to do')
    return 'done'
  }
  if (feedback.kind === 'complaint') {
    const complained: WebhookEvent = {
      id: newEventId(),
      type: 'recipient.complained',
      accountId: row.accountId,
      time: now,
      data: { recipient: row.recipient, transactionId: row.txid, via: feedback.feedbackType },
    }
    const added = await store.blocks.addToList({
      accountId: row.accountId,
      source: 'internal',
      kind: 'recipient',
      address: row.recipient,
      reason: `complained: ${feedback.feedbackType} report from a feedback loop`,
      now,
      txid: row.txid,
      events: [complained],
    })
    // A recipient suppressed already (unsubscribed, bounced) complained all the same: the account hears of it.
    if (!added) await store.webhooks.emit([complained])
    logger.info({ ...log, added }, 'return path: complaint, recipient suppressed')
    return 'done'
  }
  // Its outcome is on its way into the queue (a bounce can beat the commit of the 250 it follows).
  if (row.state === 'queued' || row.state === 'deferred') return 'later'
  if (row.state !== 'delivered') {
    logger.info({ ...log, state: row.state }, 'return path: a failure of a recipient not delivered')
    return 'done'
  }
  const response = `a bounce after delivery: ${feedback.response}`
  const suppressed = classify(feedback.code ?? 550, feedback.response).userUnknown
  const failed = await store.queue.lateFailure({
    id: row.id,
    time: now,
    code: feedback.code,
    response,
    suppressed,
    events: [
      {
        id: newEventId(),
        type: 'message.failed',
        accountId: row.accountId,
        time: now,
        data: {
          transactionId: row.txid,
          recipient: row.recipient,
          from: row.envFrom,
          subject: row.subject,
          messageId: row.messageId,
          code: feedback.code,
          response,
          mxHost: null,
          attempt: row.attempts + 1,
          suppressed,
        },
      },
    ],
  })
  if (failed && suppressed)
    await store.blocks.addToList({
      accountId: row.accountId,
      source: 'internal',
      kind: 'recipient',
      address: row.recipient,
      reason: `a message to it bounced after delivery: ${feedback.response}`,
      now,
      txid: row.txid,
    })
  logger.info({ ...log, failed, suppressed }, 'return path: late bounce')
  return 'done'
}

/**
 * The MX door's intake for mail to return paths: each recipient (a delivery row) gets what the
 * report says of it. Answered 250 once every one is recorded; 451 when a row's own outcome is not
 * committed yet, so that the reporting server sends it again later and nothing is lost.
 */
export function feedbackIntake(deps: FeedbackDeps) {
  return async (message: { raw: Buffer[]; mailFrom: string; rows: number[] }): Promise<IntakeAnswer> => {
    const raw = joinPieces(message.raw)
    let later = false
    for (const id of new Set(message.rows)) {
      const row = await deps.store.queue.delivery(id)
      // A row pruned with its log since: nothing is left to mark.
      if (!row) continue
      if ((await apply(deps, row, readFeedback(raw, message.mailFrom, row.recipient))) === 'later') later = true
    }
    if (later)
      return {
        code: 451,
        text: '4.3.0 The message this reports on is still being recorded; try again later',
        reason: 'temporary_failure',
      }
    return { code: 250, text: '2.0.0 Report taken' }
  }
}
