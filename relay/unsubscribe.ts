import type { Logger } from 'pino'
import { newEventId, type Store, type UnsubscribeLink } from '../storage/store.js'
import { messageHead } from './message.js'
import { refusal } from './refusal.js'

/** Where the unsubscribe links point, under MAILROOM_PUBLIC_URL: `/unsubscribe/<token>`. */
export const UNSUBSCRIBE_PATH = '/unsubscribe'

/** The suppression reason an unsubscribe leaves (getSuppressions' `reason`, getMailBlocks' `unsubscribed`). */
export const UNSUBSCRIBED = 'unsubscribed'

/** RFC 8058 §3.1: the one body a one-click POST carries. */
export const ONE_CLICK = 'List-Unsubscribe=One-Click'

const HAS_LIST_UNSUBSCRIBE = /^list-unsubscribe(?:-post)?[ \t]*:/im

/**
 * Whether a message may go as bulk mail: to one recipient, since each link names its recipient, and
 * without a List-Unsubscribe of its own, which is refused rather than the message given two.
 */
function checkBulk(message: { recipients: string[]; raw: Buffer[] }): void {
  const { recipients } = message
  if (recipients.length !== 1) {
    throw refusal(
      'bulk_recipients',
      `to: a bulk send (list) goes to one recipient, each with an unsubscribe link of their own; this one has ${recipients.length}: send one message per recipient`,
      { code: 452, enhanced: '4.5.3' },
    )
  }
  // Its header block only: a body may quote one (a forwarded newsletter).
  const head = messageHead(message.raw).toString('latin1')
  if (HAS_LIST_UNSUBSCRIBE.test(head.slice(0, head.search(/\r?\n\r?\n/) + 1 || undefined))) {
    throw refusal(
      'list_header',
      "the message has a List-Unsubscribe field of its own, and bulk mail (list) gets mailroom's: remove the field, or send it as transactional mail",
      { code: 554, enhanced: '5.6.0' },
    )
  }
}

/**
 * The header lines of a bulk message (RFC 2369, RFC 8058) for its one recipient: a link of its own
 * to mailroom, and the one-click POST field. They go in front of the message before it is signed,
 * so the signature covers them (relay/dkim.ts signs both, and once more than they occur).
 */
function listHeaders(
  store: Pick<Store['blocks'], 'unsubscribeToken'>,
  publicUrl: string,
  link: UnsubscribeLink,
): Buffer {
  const token = store.unsubscribeToken(link)
  // Not folded: a URL is one token (RFC 2369 §2), well under the 998-character line limit.
  return Buffer.from(
    `List-Unsubscribe: <${publicUrl}${UNSUBSCRIBE_PATH}/${token}>\r\nList-Unsubscribe-Post: ${ONE_CLICK}\r\n`,
  )
}

/**
 * Bulk mail as the pipeline handles it: checked (checkBulk), then given its header lines
 * (listHeaders). An http:// link is said once a process: receivers use only https:// ones for
 * one-click unsubscribe (Gmail, Yahoo), and a local trial's is http://localhost.
 */
export function bulkMail(deps: {
  store: Pick<Store['blocks'], 'unsubscribeToken'>
  publicUrl: string
  logger: Pick<Logger, 'warn'>
}) {
  let warned = !deps.publicUrl.startsWith('http://')
  return {
    check(message: { recipients: string[]; raw: Buffer[] }): void {
      checkBulk(message)
      if (warned) return
      warned = true
      deps.logger.warn(
        { publicUrl: deps.publicUrl },
        'bulk mail carries an http:// unsubscribe link, which Gmail and Yahoo do not use for one-click unsubscribe: set MAILROOM_PUBLIC_URL to the https:// address the service is reached at',
      )
    },
    headers: (link: UnsubscribeLink) => listHeaders(deps.store, deps.publicUrl, link),
  }
}

/**
 * What an unsubscribe link does when used (its token opened: openUnsubscribeToken): the recipient
 * it names goes on its account's suppression list (reason `unsubscribed`), and the account's
 * webhooks hear `recipient.unsubscribed` in the same commit. False when the recipient was
 * suppressed already (a second click changes nothing, and tells nobody again).
 */
export function unsubscribe(
  store: Pick<Store['blocks'], 'addToList'>,
  link: UnsubscribeLink,
  via: 'one-click' | 'page',
  now: number,
): Promise<boolean> {
  return store.addToList({
    accountId: link.accountId,
    source: 'internal',
    kind: 'recipient',
    address: link.address,
    reason: UNSUBSCRIBED,
    now,
    txid: link.txid,
    events: [
      {
        id: newEventId(),
        type: 'recipient.unsubscribed',
        accountId: link.accountId,
        time: now,
        data: { recipient: link.address.toLowerCase(), transactionId: link.txid, via },
      },
    ],
  })
}
