import type { Logger } from 'pino'
import type { AuthVerdict, Store } from '../../storage/store.js'
import type { MxRefusalReason } from '../refusal.js'
import { parseInbound } from './parse.js'
import { splitHead } from './pieces.js'

/** A message the MX door received whole, with what its session said about it. */
export interface ArrivedMessage {
  /** The message in the pieces it arrived in (never joined). */
  raw: Buffer[]
  /** The envelope sender, '' for the null sender. */
  mailFrom: string
  /** The connecting client's address. */
  remoteAddress: string
  /** What the client said in EHLO or HELO (its address when it said nothing). */
  heloName: string
  /** The recipients accepted at RCPT, by the account each is an inbox of, in order. */
  byAccount: [accountId: number, recipients: string[]][]
}

/** The reply to the end of DATA: 250 with the stored ids, or a refusal and why (counted by the door). */
export interface IntakeAnswer {
  code: number
  text: string
  reason?: MxRefusalReason
}

/**
 * What the MX door does with a message once it arrived whole: check it, then parse and store it.
 * The two stages can run on two threads: in `mailroom serve` the checks (inboundIntake, in
 * verify.ts) run on the door's event loop and the parse and the commit (storeChecked) in the
 * engine thread (relay/engine.ts), so that one message is checked while the one before it is
 * committed. The engine thread never loads mailauth.
 */
export type MessageIntake = (message: ArrivedMessage) => Promise<IntakeAnswer>

/** A message that passed the checks, with their verdict. */
export interface CheckedMessage extends ArrivedMessage {
  auth: AuthVerdict
}

/** The second stage: parses and stores a checked message; the door's reply. */
export type StoreChecked = (message: CheckedMessage) => Promise<IntakeAnswer>

export interface StoreDeps {
  receive: Store['inbound']['receive']
  /** This MX's public name, as in CheckDeps. */
  hostname: string
  clock: () => number
  logger: Logger
}

/**
 * The second stage over a store's `receive`: the message is parsed and stored with an
 * Authentication-Results header, once per account it is for; answered 250 only once every one
 * committed.
 */
export function storeChecked(deps: StoreDeps): StoreChecked {
  const { receive, hostname, clock, logger } = deps
  return async ({ raw, mailFrom, remoteAddress, byAccount, auth }) => {
    // Parsed as received: the header on top changes nothing an agent reads.
    const parsed = await parseInbound(raw, mailFrom)
    const stored = withAuthResults(raw, auth.header, hostname)
    const receivedAt = clock()
    const ids: string[] = []
    const last = byAccount.length - 1
    // One transaction per account; the 250 only once every one committed. A failure after one
    // committed is answered 451: the sender sends again, and that account may get it twice
    // (SMTP has one reply to a message, whatever the number of its recipients).
    for (const [i, [accountId, recipients]] of byAccount.entries()) {
      const rows = await receive({
        accountId,
        recipients,
        mailFrom,
        remoteAddress,
        receivedAt,
        // The receiver may take the pieces' memory over: each account but the last gets a copy.
        raw: i === last ? stored : stored.map((piece) => Buffer.from(piece)),
        parsed,
        auth,
      })
      ids.push(...rows.map((r) => r.id))
    }
    logger.info({ ip: remoteAddress, ids, recipients: byAccount.length }, 'MX message received')
    return { code: 250, text: `2.0.0 Message received as ${ids.slice(0, 10).join(' ')}` }
  }
}

/**
 * The message as stored, in pieces: this MX's Authentication-Results on top, then the message
 * (itself, not a copy). One the message already carries in this MX's name is forged (RFC 8601
 * §5: it must be removed or renamed before a reader trusts it): it is renamed
 * X-Forged-Authentication-Results, in a copy of the header block only.
 */
export function withAuthResults(raw: Buffer | Buffer[], value: string, hostname: string): Buffer[] {
  const pieces = Array.isArray(raw) ? raw : [raw]
  const { head: headBytes, rest } = splitHead(pieces)
  const head = headBytes.toString('latin1')
  const ours = new RegExp(
    `^Authentication-Results:([ \\t]*(?:\\r?\\n[ \\t]+)*${regexEscape(hostname)}[ \\t\\r\\n]*;)`,
    'gim',
  )
  const cleaned = head.replace(ours, 'X-Forged-Authentication-Results:$1')
  const top = Buffer.from(`Authentication-Results: ${value}\r\n`, 'latin1')
  if (cleaned === head) return [top, ...pieces]
  return [top, Buffer.from(cleaned, 'latin1'), ...rest]
}

const regexEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
