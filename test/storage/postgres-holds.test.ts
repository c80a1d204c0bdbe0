import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { openPostgresStore, type PostgresStore } from '../../storage/postgres/index.js'
import { HOUR_MS, type NewHold } from '../../storage/store.js'
import { newMessage, T0 } from './contract/fixture.js'
import { createTestDatabase, describePostgres, emptyTables } from './postgres.js'

// Send counters and held messages across nodes: two stores (two pools, as two `mailroom serve`
// would have) on one database, racing each other. What makes them once-only is the database's row
// locks, which no single-connection test exercises.
await describePostgres('PostgreSQL send counts and holds across nodes', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let a: PostgresStore
  let b: PostgresStore
  let f: { accountId: number; orderId: number }

  // One database for the file, emptied before each test.
  beforeAll(async () => {
    database = await createTestDatabase()
    const secret = randomBytes(32)
    a = await openPostgresStore({ url: database.url, secret })
    b = await openPostgresStore({ url: database.url, secret })
  })
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()])
    await database?.drop()
  })
  beforeEach(async () => {
    await emptyTables(a.pool)
    const account = await a.accounts.create({
      name: 'a',
      currency: 'USD',
      priceBase: 1,
      pricePerMessage: 0,
      billingDay: 1,
      createdAt: T0,
    })
    const { order } = await a.orders.create({ accountId: account.id, comment: null, senders: [], now: T0 })
    f = { accountId: account.id, orderId: order.id }
  })

  const hold = (expiresAt = T0 + HOUR_MS): NewHold => ({
    holder: 'key:1',
    holderLabel: 'API key 1',
    reason: 'the policy holds every send',
    expiresAt,
    approvalUrl: 'https://mail.example/console/approvals?id=x',
    response: 'held for approval',
  })
  /** A held message, stored through `a`. */
  const held = async (expiresAt?: number) => {
    const m = newMessage(f, { recipients: ['one@b.example', 'two@c.example'] })
    await a.holds.create(m, hold(expiresAt))
    return m.txid
  }
  /** The states of a message's delivery rows and whether each is due, as the database holds them. */
  const rowsOf = async (txid: string) =>
    (
      await a.pool.query<{ state: string; due: boolean }>(
        `SELECT d.state, d.next_attempt_at IS NOT NULL AS due FROM deliveries d JOIN messages m ON m.id = d.message_id
        WHERE m.txid = $1 ORDER BY d.seq`,
        [txid],
      )
    ).rows
  const bodyParts = async (txid: string) =>
    (
      await a.pool.query<{ n: number }>(
        'SELECT COUNT(*)::int AS n FROM message_bodies b JOIN messages m ON m.id = b.message_id WHERE m.txid = $1',
        [txid],
      )
    ).rows[0].n

  it('counts exactly maxPerHour of 20 concurrent takes on two nodes', async () => {
    const take = (i: number) =>
      (i % 2 ? a : b).sendCounts.take({ holder: 'key:1', now: T0 + i, maxPerHour: 5, maxPerDay: null })
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => take(i)))
    expect(answers.filter((r) => r.ok)).toHaveLength(5)
    for (const r of answers.filter((r) => !r.ok))
      expect(r).toEqual({ ok: false, period: 'hour', limit: 5, freesAt: T0 + HOUR_MS })
    // The refused takes counted nothing, not even in the day.
    expect(await b.sendCounts.current('key:1', T0)).toEqual({ hour: 5, day: 5 })
  })

  it('rolls back the day counted by a take the full hour refuses', async () => {
    const take = (i: number) =>
      (i % 2 ? a : b).sendCounts.take({ holder: 'order:1', now: T0 + i, maxPerHour: 3, maxPerDay: 100 })
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => take(i)))
    expect(answers.filter((r) => r.ok)).toHaveLength(3)
    expect(answers.filter((r) => !r.ok && r.period === 'hour')).toHaveLength(9)
    expect(await a.sendCounts.current('order:1', T0)).toEqual({ hour: 3, day: 3 })
  })

  it('decides a hold once when approve and reject race on two nodes', async () => {
    for (let round = 0; round < 5; round++) {
      const txid = await held()
      const answers = await Promise.all([
        a.holds.decide({ txid, decision: 'approve', by: 'API key 1 (console or API)', now: T0 + 1 }),
        b.holds.decide({ txid, decision: 'reject', by: 'the operator (mailroom approvals)', now: T0 + 1 }),
      ])
      const decided = answers.filter((r) => r?.state === 'decided')
      expect(decided).toHaveLength(1)
      const { hold: winner } = decided[0]!
      // The loser is answered the winner's decision.
      expect(answers.find((r) => r?.state === 'already')?.hold).toEqual(winner)
      expect(await b.holds.get(txid)).toEqual(winner)
      const rows = await rowsOf(txid)
      if (winner.status === 'approved') {
        expect(rows).toEqual([
          { state: 'queued', due: true },
          { state: 'queued', due: true },
        ])
        expect(await bodyParts(txid)).toBeGreaterThan(0)
      } else {
        expect(rows).toEqual([
          { state: 'rejected', due: false },
          { state: 'rejected', due: false },
        ])
        expect(await bodyParts(txid)).toBe(0)
      }
    }
  })

  it('decides a hold once when the same decision arrives on both nodes', async () => {
    const txid = await held()
    const answers = await Promise.all(
      [a, b, a, b].map((s) => s.holds.decide({ txid, decision: 'approve', by: 'API key 1', now: T0 + 1 })),
    )
    expect(answers.map((r) => r?.state).sort()).toEqual(['already', 'already', 'already', 'decided'])
    // Approved once: one message.accepted per recipient would be written once, and the rows are due once.
    expect(await rowsOf(txid)).toEqual([
      { state: 'queued', due: true },
      { state: 'queued', due: true },
    ])
    expect(await a.queue.claim({ node: 'n', now: T0 + 2, leaseMs: 60_000, limit: 10 })).toHaveLength(2)
  })

  it('rejects a hold past its expiry once, whether expiry or a decision gets there first', async () => {
    const expiresAt = T0 + 10
    const txids = await Promise.all(Array.from({ length: 6 }, () => held(expiresAt)))
    const late = T0 + 20
    const [expiredA, expiredB, ...decisions] = await Promise.all([
      a.holds.expire(late),
      b.holds.expire(late),
      ...txids.map((txid, i) =>
        (i % 2 ? a : b).holds.decide({ txid, decision: 'approve', by: 'API key 1', now: late }),
      ),
    ])
    // Every hold ends rejected by expiry, however the race went: a decision past the expiry is answered `already`.
    expect(decisions.every((r) => r?.state === 'already' && r.hold.status === 'rejected')).toBe(true)
    for (const txid of txids) {
      expect(await a.holds.get(txid)).toMatchObject({ status: 'rejected', decidedBy: 'expiry (MAILROOM_APPROVAL_TTL)' })
      expect(await rowsOf(txid)).toEqual([
        { state: 'rejected', due: false },
        { state: 'rejected', due: false },
      ])
    }
    // The two sweeps and the decisions rejected each hold once between them: one refusal each.
    expect(expiredA + expiredB).toBeLessThanOrEqual(6)
    const [volume] = await a.mail.volume({ orderIds: [f.orderId], from: T0, to: T0 + HOUR_MS, interval: 'hour' })
    expect(volume).toMatchObject({ accepted: 12, refused: 6 })
    expect((await a.holds.list({ status: 'rejected', skip: 0, limit: 100 })).total).toBe(6)
    expect(await a.holds.expire(late)).toBe(0)
  })

  it('never hands out a held row, whatever the queue is asked', async () => {
    const txid = await held()
    expect(await b.queue.claim({ node: 'n', now: T0 + 1, leaseMs: 60_000, limit: 10 })).toEqual([])
    expect(await b.queue.pending()).toBe(0)
    expect((await b.queue.depth()).recipients).toBe(0)
    expect(await b.queue.waiting({ now: T0 + 1, leaseMs: 60_000 })).toEqual([])
    expect(await b.queue.retry({ txid, now: T0 + 1, leaseMs: 60_000 })).toEqual({ changed: 0, inFlight: 0 })
    // A cancel of a held message changes nothing, and keeps its bytes for the decision.
    expect(await b.queue.cancel({ txid, now: T0 + 1, leaseMs: 60_000, response: 'cancelled' })).toEqual({
      changed: 0,
      inFlight: 0,
    })
    expect(await bodyParts(txid)).toBeGreaterThan(0)
    expect(await rowsOf(txid)).toEqual([
      { state: 'held', due: false },
      { state: 'held', due: false },
    ])
  })
})
