/**
 * The sandbox: the mail of a sandbox API key or a sandbox mail order goes through the whole
 * pipeline (validation, authorized senders, deny rules, the spam filter, the durable queue, the
 * log, statistics) but never leaves the machine. The delivery worker asks this module, not a
 * destination, what each recipient's attempt was answered, and records that like any reply: no
 * DNS lookup, no connection. Every recipient takes the message at once, but for the special
 * addresses below, with which an agent rehearses the other outcomes.
 */
import type { QueueItem } from '../storage/store.js'
import type { Attempt } from './mx-client.js'
import type { Reply } from './smtp-session.js'

/** The special recipients' domain. RFC 2606 §2: `.invalid` never resolves, so it cannot be real mail. */
export const SANDBOX_DOMAIN = 'sandbox.mailroom.invalid'

const ACCEPTED: Reply = {
  code: 250,
  response: '250 2.0.0 sandbox: accepted and not sent (sandbox mail never leaves this machine)',
  toRcpt: true,
}

/**
 * The special recipients, by address (lower case), and how an attempt to each is answered, given
 * the attempts made before it. Kept as data: docs/api.md#the-sandbox lists the same.
 */
export const SANDBOX_RECIPIENTS: ReadonlyMap<string, (attempts: number) => Reply> = new Map<
  string,
  (attempts: number) => Reply
>([
  // As a mailbox that does not exist: failed at once, the sender sent a report, the address suppressed.
  [
    `bounce@${SANDBOX_DOMAIN}`,
    () => ({
      code: 550,
      response: `550 5.1.1 <bounce@${SANDBOX_DOMAIN}>: sandbox: no such mailbox (a rehearsed bounce)`,
      toRcpt: true,
    }),
  ],
  // As a busy destination: deferred at the first attempt, taken at the next (MAILROOM_RETRY_SCHEDULE).
  [
    `defer@${SANDBOX_DOMAIN}`,
    (attempts) =>
      attempts === 0
        ? {
            code: 451,
            response: `451 4.3.0 <defer@${SANDBOX_DOMAIN}>: sandbox: try again later (a rehearsed deferral; the next attempt takes it)`,
            toRcpt: true,
          }
        : ACCEPTED,
  ],
])

/** The attempt a sandbox message's recipients at one domain get, as if a destination had answered. */
export function sandboxAttempt(items: QueueItem[]): Attempt {
  return {
    mxHostname: null,
    mxAddress: null,
    tls: null,
    replies: new Map(
      items.map((item) => [
        item.recipient,
        SANDBOX_RECIPIENTS.get(item.recipient.toLowerCase())?.(item.attempts) ?? ACCEPTED,
      ]),
    ),
  }
}
