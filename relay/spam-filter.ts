import type { Logger } from 'pino'
import type { Store } from '../storage/store.js'
import type { Intake } from './pipeline.js'
import { refusal } from './refusal.js'

const DAY = 86_400_000
/** The contract's limits: a spam-indicative subject may repeat this many times in the window. */
export const SUBJECT_THRESHOLD = 4
export const SUBJECT_WINDOW_MS = 3 * DAY
/** Look-back of the `local` and `mbtrap` lists of GET /mail/blocks. */
export const EVENT_WINDOW_MS = 5 * DAY

/** Subjects that relay spammers use: an address, or a mention of SMTP or SOCKS proxies. */
export const SPAM_SUBJECT_MARKERS = ['@', 'smtp', 'socks4', 'socks5']

export const isSpamSubject = (subject: string) => SPAM_SUBJECT_MARKERS.some((m) => subject.toLowerCase().includes(m))

const BLOCKED = { code: 550, enhanced: '5.7.1' }
const DELIST = 'delist it with POST /mail/blocks/delete (the delistBlock tool)'

/** What is known of the message when a recipient is checked (SMTP: no subject yet at RCPT TO). */
export interface FilterContext {
  accountId: number
  envFrom: string
  subject: string | null
  messageId: string | null
  /** The input field a refused recipient came from, which its message names (`to` unless given). */
  field?: string
}

/**
 * The spam filter of the sending pipeline, after the deny rules and before the queue. It reads
 * and fills the three block stores of the account: blocked senders are refused; recipients on
 * the local block list or the operator's trap list are refused and recorded (a trap also blocks
 * the sender); spam-indicative subjects are counted, and past the threshold refused.
 */
export function createSpamFilter({
  store,
  intake,
  logger,
  clock,
}: {
  store: Store
  intake: Intake
  logger: Logger
  clock: () => number
}) {
  return {
    async checkSender(accountId: number, envFrom: string): Promise<void> {
      const entry = await store.blocks.blockedSender(accountId, envFrom)
      if (entry) {
        const why = entry.source === 'external' ? 'it is on an imported block list' : entry.reason
        throw refusal('blocked_sender', `from: sender ${envFrom} is blocked (${why}); ${DELIST}`, BLOCKED)
      }
    },

    async checkRecipient(c: FilterContext, rcpt: string): Promise<void> {
      const event = {
        createdAt: clock(),
        envFrom: c.envFrom,
        messageId: c.messageId,
        subject: c.subject ?? '',
        rcptTo: rcpt,
      }
      const suppression = await store.blocks.suppressed(c.accountId, rcpt)
      if (suppression) {
        await intake.addEvent(c.accountId, { ...event, rule: 'LOCAL_BL_RCPT' })
        throw refusal(
          'suppressed_recipient',
          `${c.field ?? 'to'}: recipient ${rcpt} is on this account's local block list (${suppression.reason}); if it is valid again, ${DELIST}`,
          BLOCKED,
        )
      }
      const trap = await store.traps.match(rcpt)
      if (trap) {
        await intake.addEvent(c.accountId, { ...event, rule: 'MBTRAP' })
        await store.blocks.addToList({
          accountId: c.accountId,
          source: 'internal',
          kind: 'sender',
          address: c.envFrom,
          reason: `sent to the spam trap ${rcpt}`,
          now: clock(),
        })
        logger.warn({ account: c.accountId, trap }, 'spam trap hit: sender blocked')
        throw refusal(
          'spam_trap',
          `${c.field ?? 'to'}: recipient ${rcpt} is a spam trap; the sender ${c.envFrom} is now blocked; ${DELIST}`,
          BLOCKED,
        )
      }
    },

    /**
     * Counts a spam-indicative subject, and refuses it when the sender has already sent it more
     * than the threshold allows (and blocks the sender).
     */
    async checkSubject(c: FilterContext, recipients: string[]): Promise<void> {
      if (!c.subject || !isSpamSubject(c.subject)) return
      const event = {
        createdAt: clock(),
        envFrom: c.envFrom,
        messageId: c.messageId,
        subject: c.subject,
        rcptTo: recipients.join(','),
      }
      if (await intake.takeSubject(c.accountId, event, clock() - SUBJECT_WINDOW_MS, SUBJECT_THRESHOLD)) return
      await store.blocks.addToList({
        accountId: c.accountId,
        source: 'internal',
        kind: 'sender',
        address: c.envFrom,
        reason: `repeated the subject "${c.subject}"`,
        now: clock(),
      })
      logger.warn({ account: c.accountId }, 'repeated spam-indicative subject: sender blocked')
      throw refusal(
        'spam_subject',
        `subject: "${c.subject}" was sent more than ${SUBJECT_THRESHOLD} times in 3 days by ${c.envFrom}; the sender is now blocked; ${DELIST}`,
        BLOCKED,
      )
    },
  }
}

export type SpamFilter = ReturnType<typeof createSpamFilter>
