import { describe, expect, it } from 'vitest'
import { classify, nextAttempt } from '../../relay/bounces.js'

describe('reply classes', () => {
  it.each([
    [250, '250 2.0.0 Ok: queued', 'delivered', false],
    [251, '251 User not local; will forward', 'delivered', false],
    [421, '421 4.3.2 Service not available', 'deferred', false],
    [450, '450 4.2.1 Mailbox busy', 'deferred', false],
    [452, '452 4.5.3 Too many recipients', 'deferred', false],
    [null, 'Connection closed unexpectedly', 'deferred', false],
    [550, '550 5.1.1 <x@example.com>: Recipient address rejected: User unknown', 'failed', true],
    [550, '550 No such user here', 'failed', true],
    [550, '550 5.1.1 The email account that you tried to reach does not exist', 'failed', true],
    [553, '553 5.1.6 Mailbox has moved', 'failed', true],
    [550, '550 Requested action not taken: mailbox unavailable (policy)', 'failed', false],
    [554, '554 5.7.1 Message rejected as spam', 'failed', false],
    [556, '556 5.1.10 example.com does not accept mail (null MX)', 'failed', false],
    // "user unknown" in a 4xx reply is only a deferral: the mailbox may come back.
    [450, '450 4.1.1 User unknown in local table (try later)', 'deferred', false],
  ])('%s %s → %s (user unknown: %s)', (code, response, state, userUnknown) => {
    expect(classify(code, response)).toEqual({ state, userUnknown })
  })
})

describe('retry schedule', () => {
  const MIN = 60_000
  const schedule = [5 * MIN, 10 * MIN, 20 * MIN]
  const queued = 1_000_000_000_000
  it.each([
    [1, queued, queued + 5 * MIN],
    [2, queued + 5 * MIN, queued + 15 * MIN],
    [3, queued + 15 * MIN, queued + 35 * MIN],
    // The last wait repeats.
    [4, queued + 35 * MIN, queued + 55 * MIN],
    [9, queued + 200 * MIN, queued + 220 * MIN],
  ])('attempt %i at %i → next at %i', (attempts, now, expected) => {
    expect(nextAttempt(schedule, attempts, queued, now, 48 * 60 * MIN)).toBe(expected)
  })

  it('gives up when the next try would pass the maximum age', () => {
    expect(nextAttempt(schedule, 5, queued, queued + 100 * MIN, 110 * MIN)).toBeNull()
    expect(nextAttempt(schedule, 5, queued, queued + 90 * MIN, 110 * MIN)).toBe(queued + 110 * MIN)
  })
})
