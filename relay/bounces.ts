/**
 * What a destination's reply means for a recipient. Kept as data: the classes of permanent
 * failures that say the mailbox does not exist, and the retry schedule after temporary ones.
 */

/** 5xx replies that say the mailbox does not exist: the recipient goes on the local block list. */
export const USER_UNKNOWN_PATTERNS: RegExp[] = [
  /\b5\.1\.1\b/, // RFC 3463: bad destination mailbox address
  /\b5\.1\.6\b/, // RFC 3463: destination mailbox has moved
  /user (is )?unknown/i,
  /unknown (user|recipient|mailbox)/i,
  /no such (user|mailbox|recipient)/i,
  /(mailbox|recipient|address|user) (does not|doesn't) exist/i,
  /(mailbox|user|recipient) not found/i,
  /invalid (mailbox|recipient)/i,
]

export type Verdict = { state: 'delivered' | 'deferred' | 'failed'; userUnknown: boolean }

/** RFC 5321 §4.2.1: 2yz success, 4yz transient, 5yz permanent. No code (a dropped connection, a timeout) is transient. */
export function classify(code: number | null, response: string): Verdict {
  if (code !== null && code >= 200 && code < 300) return { state: 'delivered', userUnknown: false }
  if (code !== null && code >= 500 && code < 600) {
    return { state: 'failed', userUnknown: USER_UNKNOWN_PATTERNS.some((p) => p.test(response)) }
  }
  return { state: 'deferred', userUnknown: false }
}

/**
 * When a deferred recipient is tried again: the schedule's wait for this attempt (the last one
 * repeats), or null when that would pass the maximum age and the recipient fails instead.
 */
export function nextAttempt(
  schedule: number[],
  attempts: number,
  queuedAt: number,
  now: number,
  maxAge: number,
): number | null {
  const wait = schedule[Math.min(attempts, schedule.length) - 1] ?? schedule[schedule.length - 1]
  const at = now + wait
  return at - queuedAt > maxAge ? null : at
}
