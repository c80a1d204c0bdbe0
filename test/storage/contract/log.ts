import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { LogQuery } from '../../../storage/store.js'
import { type Fixture, LEASE_MS, logOf, newMessage, outcome, T0 } from './fixture.js'

/** One log row as the suite expects it: a recipient of a message of the fixture's log. */
interface Expected {
  txid: string
  to: string
  recipients: string[]
  from: string
  subject: string | null
  messageId: string | null
  replyTo: string | null
  headerFrom: string | null
  origin: string
  /** Epoch seconds. */
  time: number
  delivered: number
  mx: string
}

/**
 * Four messages of the fixture's order a minute apart, and one of another account's order with
 * the same sender, recipient and subject, tried once: b.example delivered, c.example deferred,
 * d.example failed. Resolves with the fixture order's rows, oldest first.
 */
async function logFixture(f: Fixture): Promise<Expected[]> {
  const messages = [
    newMessage(f, {
      envFrom: 'alice@a.example',
      recipients: ['x@b.example', 'y@c.example'],
      subject: 'Invoice 1',
      messageId: '<inv-1@a.example>',
      replyTo: 'billing@a.example',
      headerFrom: 'Alice <alice@a.example>',
    }),
    newMessage(f, {
      envFrom: 'bob@a.example',
      subject: 'Hello',
      messageId: '<hello-2@a.example>',
      origin: '192.0.2.2',
    }),
    newMessage(f, { envFrom: 'alice@a.example', recipients: ['z@d.example'], subject: 'Invoice 2' }),
    newMessage(f, { envFrom: 'carol@a.example', recipients: ['x@b.example', 'z@d.example'], subject: 'Hello' }),
  ].map((m, i) => ({ ...m, time: T0 + i * 60_000, messageId: m.messageId ?? `<m${i}@a.example>` }))
  messages[1].recipients = ['x@b.example']
  const other = {
    ...messages[0],
    accountId: f.otherAccountId,
    orderId: f.otherOrderId,
    recipients: ['x@b.example'],
    txid: randomBytes(9).toString('hex'),
    time: T0 + 30_000,
  }
  for (const m of [messages[0], other, ...messages.slice(1)]) await f.store.mail.enqueue(m)
  const state = (to: string) =>
    ({ 'b.example': 'delivered', 'c.example': 'deferred', 'd.example': 'failed' })[to.split('@')[1]] as
      | 'delivered'
      | 'deferred'
      | 'failed'
  const items = await f.store.queue.claim({ node: 'n', now: T0 + 240_000, leaseMs: LEASE_MS, limit: 100 })
  await f.store.queue.record(items.map((i) => outcome(i.id, state(i.recipient), T0 + 3_600_000)))
  return messages.flatMap((m) =>
    m.recipients.map((to) => ({
      txid: m.txid,
      to,
      recipients: m.recipients,
      from: m.envFrom,
      subject: m.subject,
      messageId: m.messageId,
      replyTo: m.replyTo,
      headerFrom: m.headerFrom,
      origin: m.origin,
      time: Math.floor(m.time / 1000),
      delivered: state(to) === 'delivered' ? 1 : 0,
      mx: outcome(0, state(to)).mxHostname!,
    })),
  )
}

export function logContract(f: Fixture) {
  describe('log', () => {
    const t1 = Math.floor(T0 / 1000)
    /** Each filter, and which of the fixture's rows it selects. */
    const FILTERS: [string, Partial<LogQuery>, (r: Expected) => boolean][] = [
      ['nothing', {}, () => true],
      ['from', { from: 'alice@a.example' }, (r) => r.from === 'alice@a.example'],
      ['to', { to: 'x@b.example' }, (r) => r.to === 'x@b.example'],
      ['subject', { subject: 'Hello' }, (r) => r.subject === 'Hello'],
      ['messageId, a part of it', { messageId: 'inv-1' }, (r) => r.messageId!.includes('inv-1')],
      ['replyto', { replyto: 'billing@a.example' }, (r) => r.replyTo === 'billing@a.example'],
      ['headerfrom', { headerfrom: 'Alice <alice@a.example>' }, (r) => r.headerFrom === 'Alice <alice@a.example>'],
      ['origin', { origin: '192.0.2.2' }, (r) => r.origin === '192.0.2.2'],
      ['mx', { mx: 'mx.failed.example' }, (r) => r.mx === 'mx.failed.example'],
      ['delivered=1', { delivered: 1 }, (r) => r.delivered === 1],
      ['delivered=0', { delivered: 0 }, (r) => r.delivered === 0],
      ['a time window', { startTime: t1 + 60, endTime: t1 + 120 }, (r) => r.time >= t1 + 60 && r.time <= t1 + 120],
      [
        'from and delivered',
        { from: 'alice@a.example', delivered: 0 },
        (r) => r.from === 'alice@a.example' && !r.delivered,
      ],
      [
        'subject and to',
        { subject: 'Hello', to: 'z@d.example' },
        (r) => r.subject === 'Hello' && r.to === 'z@d.example',
      ],
    ]

    it.each(FILTERS)('filters by %s, one row per recipient, oldest or newest first', async (_label, filter, keep) => {
      const expected = (await logFixture(f)).filter(keep)
      const asc = await logOf(f, filter)
      expect(asc.rows.map((r) => [r.id, r.to, r.from, r.subject, r.delivered])).toEqual(
        expected.map((r) => [r.txid, r.to, r.from, r.subject, r.delivered]),
      )
      expect(asc.total).toBe(expected.length)
      const desc = await logOf(f, { ...filter, dir: 'desc' })
      expect(desc.rows.map((r) => [r.id, r.to])).toEqual(expected.map((r) => [r.txid, r.to]).reverse())
      expect(desc.total).toBe(expected.length)
    })

    it.each(FILTERS)('filters by %s, one row per message with every recipient', async (_label, filter, keep) => {
      const rows = await logFixture(f)
      const txids = new Set(rows.filter(keep).map((r) => r.txid))
      const expected = rows.filter((r) => txids.has(r.txid) && r.to === r.recipients[0])
      const log = await logOf(f, { ...filter, groupby: 'message' })
      expect(log.rows.map((r) => [r.id, r.to, r.from])).toEqual(
        expected.map((r) => [r.txid, r.recipients.join(','), r.from]),
      )
      expect(log.total).toBe(expected.length)
    })

    it('filters by mail id', async () => {
      const rows = await logFixture(f)
      const expected = rows.filter((r) => r.txid === rows.at(-1)!.txid)
      const log = await logOf(f, { mailid: expected[0].txid })
      expect(log.rows.map((r) => [r.id, r.to])).toEqual(expected.map((r) => [r.txid, r.to]))
      expect(log.total).toBe(expected.length)
    })

    it('pages with skip and limit, the total counting every row', async () => {
      const expected = await logFixture(f)
      for (const groupby of ['recipient', 'message'] as const) {
        const all = (await logOf(f, { groupby, dir: 'desc' })).rows.map((r) => r._id)
        const pages: number[] = []
        for (let skip = 0; skip < all.length + 2; skip += 2) {
          const page = await logOf(f, { groupby, dir: 'desc', skip, limit: 2 })
          expect(page.total).toBe(groupby === 'message' ? new Set(expected.map((r) => r.txid)).size : expected.length)
          pages.push(...page.rows.map((r) => r._id))
        }
        expect(pages).toEqual(all)
        expect(new Set(all).size).toBe(all.length)
      }
    })

    it("never shows another order's rows", async () => {
      const mine = await logFixture(f)
      for (const [, filter] of FILTERS) {
        const theirs = await logOf(f, { ...filter, orderId: f.otherOrderId })
        expect(theirs.rows.every((r) => !mine.some((m) => m.txid === r.id))).toBe(true)
        expect(theirs.rows.every((r) => r.orderId === f.otherOrderId)).toBe(true)
      }
      const theirs = await logOf(f, { orderId: f.otherOrderId })
      expect(theirs.rows.map((r) => [r.to, r.subject])).toEqual([['x@b.example', 'Invoice 1']])
      expect(theirs.total).toBe(1)
    })

    it('counts usage, received and sent mail, and the busiest recipients, senders and client addresses', async () => {
      const rows = await logFixture(f)
      const messages = rows.filter((r) => r.to === r.recipients[0])
      const tally = (keys: string[], top: number) => {
        const n = new Map<string, number>()
        for (const k of keys) n.set(k, (n.get(k) ?? 0) + 1)
        return Object.fromEntries([...n].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, top))
      }
      const inCycle = (r: Expected) => r.time >= T0 / 1000 + 60 && r.time < T0 / 1000 + 180
      for (const [since, top] of [
        [null, 10],
        [T0 + 120_000, 10],
        [null, 1],
      ] as const) {
        const inWindow = (r: Expected) => since === null || r.time >= since / 1000
        expect(
          await f.store.mail.stats({
            orderIds: [f.orderId],
            since,
            cycleStart: T0 + 60_000,
            cycleEnd: T0 + 180_000,
            top,
          }),
        ).toEqual({
          usage: messages.filter(inCycle).length,
          received: messages.filter(inWindow).length,
          sent: rows.filter((r) => inWindow(r) && r.delivered).length,
          volume: {
            to: tally(
              rows.filter(inWindow).map((r) => r.to),
              top,
            ),
            from: tally(
              messages.filter(inWindow).map((r) => r.from),
              top,
            ),
            ip: tally(
              messages.filter(inWindow).map((r) => r.origin),
              top,
            ),
          },
        })
      }
      expect(await f.store.mail.stats({ orderIds: [], since: null, cycleStart: 0, cycleEnd: T0 * 2, top: 10 })).toEqual(
        { usage: 0, received: 0, sent: 0, volume: { to: {}, from: {}, ip: {} } },
      )
    })
  })
}
