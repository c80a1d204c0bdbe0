import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { type Fixture, LEASE_MS, logOf, newMessage, outcome, T0 } from './fixture.js'

export function queueContract(f: Fixture) {
  describe('queue', () => {
    const claim = (node: string, now: number, limit = 100, store = f.store) =>
      store.queue.claim({ node, now, leaseMs: LEASE_MS, limit })
    const ids = (items: { id: number }[]) => items.map((i) => i.id).sort((a, b) => a - b)

    it('stores a message with its bytes and one waiting row per recipient', async () => {
      const pieces = [Buffer.from('Subject: two pieces\r\n'), randomBytes(100_000), Buffer.from('\r\n')]
      const m = newMessage(f, { recipients: ['one@b.example', 'two@c.example'], raw: pieces })
      const { rowId, leased } = await f.store.mail.enqueue(m)
      expect(leased).toBeUndefined()
      expect((await f.store.queue.body(rowId))?.equals(Buffer.concat(pieces))).toBe(true)
      expect(await f.store.queue.pending()).toBe(2)
      const waiting = await f.store.queue.waiting({ now: T0, leaseMs: LEASE_MS })
      expect(waiting.map((w) => [w.txid, w.accountId, w.recipient, w.state, w.attempts, w.nextAttemptAt])).toEqual([
        [m.txid, f.accountId, 'one@b.example', 'queued', 0, m.time],
        [m.txid, f.accountId, 'two@c.example', 'queued', 0, m.time],
      ])
    })

    it('tells its depth: the rows still to deliver and when the oldest waiting message was accepted', async () => {
      expect(await f.store.queue.depth()).toEqual({ recipients: 0, oldestQueuedAt: null })
      await f.store.mail.enqueue(newMessage(f, { recipients: ['one@b.example', 'two@c.example'], time: T0 }))
      await f.store.mail.enqueue(newMessage(f, { time: T0 + 60_000 }))
      expect(await f.store.queue.depth()).toEqual({ recipients: 3, oldestQueuedAt: T0 })
      // Leased rows still wait; a final row does not, and the first message is no longer the oldest once both of its are.
      const items = await claim('node-a', T0 + 60_000)
      expect(await f.store.queue.depth()).toEqual({ recipients: 3, oldestQueuedAt: T0 })
      const first = items.filter((i) => i.queuedAt === T0)
      await f.store.queue.record([outcome(first[0].id, 'delivered'), outcome(first[1].id, 'failed')])
      expect(await f.store.queue.depth()).toEqual({ recipients: 1, oldestQueuedAt: T0 + 60_000 })
    })

    it('leases what it enqueues to a node when asked, in the same call', async () => {
      const m = newMessage(f, { recipients: ['one@b.example', 'two@C.example'] })
      const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      expect(
        leased?.map((i) => [i.messageRowId, i.txid, i.orderId, i.envFrom, i.recipient, i.domain, i.attempts]),
      ).toEqual([
        [rowId, m.txid, f.orderId, m.envFrom, 'one@b.example', 'b.example', 0],
        [rowId, m.txid, f.orderId, m.envFrom, 'two@C.example', 'c.example', 0],
      ])
      expect(await claim('node-b', T0)).toEqual([])
      expect(ids(await claim('node-b', T0 + LEASE_MS + 1))).toEqual(ids(leased!))
    })

    it('leases a due row to one claimer, and to another only once the lease is older than the lease time', async () => {
      const m = newMessage(f)
      await f.store.mail.enqueue(m)
      const [item] = await claim('node-a', T0)
      expect(item).toMatchObject({ txid: m.txid, recipient: 'rcpt@b.example', attempts: 0, delayReported: false })
      expect(await claim('node-b', T0 + LEASE_MS)).toEqual([])
      expect(await f.store.queue.waiting({ now: T0 + LEASE_MS, leaseMs: LEASE_MS })).toMatchObject([
        { state: 'in flight', node: 'node-a' },
      ])
      // node-a died: its lease runs out and another node takes the row over.
      expect(ids(await claim('node-b', T0 + LEASE_MS + 1))).toEqual([item.id])
      expect(await f.store.queue.waiting({ now: T0 + LEASE_MS + 1, leaseMs: LEASE_MS })).toMatchObject([
        { state: 'in flight', node: 'node-b' },
      ])
    })

    it('keeps the rows of a node that renews its leases, however long it holds them', async () => {
      await f.store.mail.enqueue(newMessage(f, { recipients: ['one@b.example', 'two@b.example'] }))
      expect(await claim('node-a', T0)).toHaveLength(2)
      const renewedAt = T0 + LEASE_MS / 2
      expect(await f.store.queue.renew('node-a', renewedAt)).toBe(2)
      expect(await f.store.queue.renew('node-b', renewedAt)).toBe(0)
      expect(await claim('node-b', T0 + LEASE_MS + 1)).toEqual([])
      expect(await claim('node-b', renewedAt + LEASE_MS + 1)).toHaveLength(2)
    })

    it('hands a row to one of two concurrent claimers only', async () => {
      for (let i = 0; i < 10; i++)
        await f.store.mail.enqueue(newMessage(f, { recipients: [`a${i}@b.example`, `b${i}@c.example`] }))
      const other = f.opened.reopen ? await f.another() : f.store
      const [a, b] = await Promise.all([claim('node-a', T0, 15), claim('node-b', T0, 15, other)])
      expect(a.length + b.length).toBe(20)
      expect(new Set([...ids(a), ...ids(b)]).size).toBe(20)
      expect(await claim('node-c', T0)).toEqual([])
    })

    it('hands every row to one claimer only when many claim at once, again and again, through two connections', async () => {
      for (let i = 0; i < 20; i++)
        await f.store.mail.enqueue(
          newMessage(f, { recipients: [`a${i}@b.example`, `b${i}@c.example`, `c${i}@d.example`] }),
        )
      const other = f.opened.reopen ? await f.another() : f.store
      const taken: number[] = []
      // Rounds of eight claimers, half on each connection, each taking a few rows, until none is left.
      for (let round = 0; round < 10; round++) {
        const claims = await Promise.all(
          Array.from({ length: 8 }, (_, i) => claim(`node-${i}`, T0, 3, i % 2 ? other : f.store)),
        )
        taken.push(...claims.flatMap(ids))
        if (claims.every((c) => c.length === 0)) break
      }
      expect(taken).toHaveLength(60)
      expect(new Set(taken).size).toBe(60)
    })

    it('gives a node that released its leases (its previous process is gone) rows back at once', async () => {
      await f.store.mail.enqueue(newMessage(f, { recipients: ['one@b.example', 'two@b.example'] }))
      const held = await claim('node-a', T0)
      expect(await f.store.queue.release('node-b')).toBe(0)
      expect(await f.store.queue.release('node-a')).toBe(2)
      expect(ids(await claim('node-a', T0))).toEqual(ids(held))
    })

    it('records a deferral: the row waits, with its reply, until its next attempt time, and counts the attempt', async () => {
      await f.store.mail.enqueue(newMessage(f))
      const [item] = await claim('node-a', T0)
      const next = T0 + 3_600_000
      await f.store.queue.record([outcome(item.id, 'deferred', next)])
      expect(await f.store.queue.waiting({ now: T0, leaseMs: LEASE_MS })).toMatchObject([
        {
          state: 'deferred',
          attempts: 1,
          code: 451,
          response: '4.7.1 try again later',
          nextAttemptAt: next,
          node: null,
        },
      ])
      expect(await f.store.queue.pending()).toBe(1)
      expect(await claim('node-a', next - 1)).toEqual([])
      expect(await claim('node-b', next)).toMatchObject([{ id: item.id, attempts: 1 }])
    })

    it.each([
      ['delivered', 1],
      ['failed', 0],
    ] as const)('records a row %s as final and never writes it again', async (state, delivered) => {
      const m = newMessage(f)
      await f.store.mail.enqueue(m)
      const [item] = await claim('node-a', T0)
      await f.store.queue.record([outcome(item.id, state)])
      const final = {
        id: m.txid,
        delivered,
        code: outcome(item.id, state).code,
        response: outcome(item.id, state).response,
      }
      expect((await logOf(f)).rows).toMatchObject([final])
      expect(await f.store.queue.pending()).toBe(0)
      expect(await f.store.queue.waiting({ now: T0, leaseMs: LEASE_MS })).toEqual([])
      // A late outcome of a worker whose lease had run out, an operator's retry or cancel: none
      // changes a final row.
      for (const late of ['delivered', 'deferred', 'failed'] as const)
        await f.store.queue.record([outcome(item.id, late, T0 + 1000)])
      expect(await f.store.queue.retry({ txid: m.txid, now: T0, leaseMs: LEASE_MS })).toEqual({
        changed: 0,
        inFlight: 0,
      })
      expect(await f.store.queue.cancel({ txid: m.txid, now: T0, leaseMs: LEASE_MS, response: 'x' })).toEqual({
        changed: 0,
        inFlight: 0,
      })
      expect((await logOf(f)).rows).toMatchObject([final])
      expect(await claim('node-b', T0 + 10 * LEASE_MS)).toEqual([])
    })

    it('queues a report to the sender with the outcomes it reports, once, and never for a row already final', async () => {
      const m = newMessage(f, { recipients: ['gone@b.example', 'busy@b.example'] })
      const { leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      const [gone, busy] = leased!
      const report = (rows: number[], action: 'failed' | 'delayed') => ({
        rows,
        action,
        message: newMessage(f, { envFrom: '', recipients: [m.envFrom] }),
      })
      const attempt = () => [outcome(gone.id, 'failed'), outcome(busy.id, 'deferred', T0 + 1000)]
      const first = [report([gone.id], 'failed'), report([busy.id], 'delayed')]
      expect(await f.store.queue.record(attempt(), first)).toEqual(first.map((r) => r.message.txid))
      // The same again: the failed row is final, the deferred one reported delayed already.
      expect(
        await f.store.queue.record(attempt(), [report([gone.id], 'failed'), report([busy.id], 'delayed')]),
      ).toEqual([])
      // A report is queued like any message: due at once, for any worker.
      const queued = (await claim('node-b', T0 + 1000)).filter((i) => i.envFrom === '')
      expect(queued.map((i) => [i.txid, i.recipient]).sort()).toEqual(
        first.map((r) => [r.message.txid, m.envFrom]).sort(),
      )
    })

    it.each(['delivered', 'failed', 'canceled'] as const)(
      'keeps the bytes of a message while a recipient waits, and drops them once the last is %s',
      async (last) => {
        // Another message waits throughout: its bytes are not the ones dropped.
        const other = await f.store.mail.enqueue(newMessage(f))
        const before = await f.opened.bodyParts()
        const m = newMessage(f, {
          recipients: ['one@b.example', 'two@b.example'],
          raw: [randomBytes(100_000), randomBytes(100_000)],
        })
        const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
        const stored = (await f.opened.bodyParts()) - before
        expect(stored).toBeGreaterThan(0)
        const [one, two] = leased!
        await f.store.queue.record([
          outcome(one.id, last === 'failed' ? 'failed' : 'delivered'),
          outcome(two.id, 'deferred', T0 + 1000),
        ])
        expect(await f.opened.bodyParts()).toBe(before + stored)
        expect((await f.store.queue.body(rowId))?.equals(Buffer.concat(m.raw))).toBe(true)
        if (last === 'canceled')
          expect(await f.store.queue.cancel({ txid: m.txid, now: T0, leaseMs: LEASE_MS, response: 'x' })).toEqual({
            changed: 1,
            inFlight: 0,
          })
        else await f.store.queue.record([outcome(two.id, last)])
        expect(await f.opened.bodyParts()).toBe(before)
        expect(await f.store.queue.body(rowId)).toBeUndefined()
        expect(await f.store.queue.body(other.rowId)).toBeDefined()
      },
    )

    it('keeps the bytes of a report it queues in the commit that drops those of the message reported on', async () => {
      const before = await f.opened.bodyParts()
      const m = newMessage(f, { recipients: ['gone@b.example'] })
      const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      const [gone] = leased!
      const report = newMessage(f, { envFrom: '', recipients: [m.envFrom] })
      expect(
        await f.store.queue.record(
          [outcome(gone.id, 'failed')],
          [{ rows: [gone.id], action: 'failed', message: report }],
        ),
      ).toEqual([report.txid])
      expect(await f.store.queue.body(rowId)).toBeUndefined()
      const [queued] = await claim('node-b', T0)
      expect(queued).toMatchObject({ txid: report.txid, envFrom: '' })
      expect((await f.store.queue.body(queued.messageRowId))?.equals(Buffer.concat(report.raw))).toBe(true)
      expect(await f.opened.bodyParts()).toBeGreaterThan(before)
      // Delivered, the report's bytes go too: what was left were its own.
      await f.store.queue.record([outcome(queued.id, 'delivered')])
      expect(await f.opened.bodyParts()).toBe(before)
    })

    it('drops the bytes of a message whose last two recipients are recorded at once through two connections', async () => {
      const other = f.opened.reopen ? await f.another() : f.store
      const { rowId, leased } = await f.store.mail.enqueue(
        newMessage(f, { recipients: ['one@b.example', 'two@b.example'] }),
        { node: 'node-a', now: T0 },
      )
      const [one, two] = leased!
      await Promise.all([
        f.store.queue.record([outcome(one.id, 'delivered')]),
        other.queue.record([outcome(two.id, 'failed')]),
      ])
      expect(await f.store.queue.body(rowId)).toBeUndefined()
      expect(await other.queue.body(rowId)).toBeUndefined()
    })

    it('answers a write only once another connection can read it', async () => {
      const other = await f.another()
      const m = newMessage(f, { recipients: ['one@b.example', 'two@b.example'] })
      const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      expect(await other.queue.waiting({ now: T0, leaseMs: LEASE_MS })).toMatchObject([
        { txid: m.txid, state: 'in flight', node: 'node-a' },
        { txid: m.txid, state: 'in flight', node: 'node-a' },
      ])
      expect((await other.queue.body(rowId))?.equals(Buffer.concat(m.raw))).toBe(true)
      const [one, two] = leased!
      await f.store.queue.record([outcome(one.id, 'delivered'), outcome(two.id, 'deferred', T0 + 1000)])
      expect((await logOf(f, {}, other)).rows.map((r) => r.response)).toEqual([
        outcome(one.id, 'delivered').response,
        outcome(two.id, 'deferred').response,
      ])
      expect(await other.queue.pending()).toBe(1)
      const event = { envFrom: 's@a.example', subject: 'FREE', createdAt: T0, messageId: null, rcptTo: 'r@b.example' }
      await f.store.blocks.takeSubject(f.accountId, event, 0, 10)
      await f.store.blocks.addEvent(f.accountId, { ...event, rule: 'MBTRAP' })
      expect((await other.blocks.events(f.accountId, 'SUBJECT', 0)).length).toBe(1)
      expect((await other.blocks.events(f.accountId, 'MBTRAP', 0)).length).toBe(1)
    })

    describe("the operator's changes (mailroom queue)", () => {
      /** A message whose recipients were tried once and deferred for an hour. */
      const deferred = async (recipients = ['later@b.example']) => {
        const m = newMessage(f, { recipients })
        const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
        await f.store.queue.record(leased!.map((i) => outcome(i.id, 'deferred', T0 + 3_600_000)))
        return { txid: m.txid, rowId, ids: ids(leased!) }
      }

      it('lists what waits, of one account or of all', async () => {
        const mine = await deferred()
        const theirs = newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId })
        await f.store.mail.enqueue(theirs)
        const txids = async (accountId?: number) =>
          (await f.store.queue.waiting({ accountId, now: T0, leaseMs: LEASE_MS })).map((w) => w.txid)
        expect(await txids()).toEqual([mine.txid, theirs.txid])
        expect(await txids(f.accountId)).toEqual([mine.txid])
        expect(await txids(f.otherAccountId)).toEqual([theirs.txid])
      })

      it('makes waiting recipients due now on retry, and leaves a leased one to its worker', async () => {
        const later = await deferred()
        expect(await claim('node-a', T0)).toEqual([])
        expect(await f.store.queue.retry({ txid: later.txid, now: T0, leaseMs: LEASE_MS })).toEqual({
          changed: 1,
          inFlight: 0,
        })
        expect(ids(await claim('node-a', T0))).toEqual(later.ids)
        expect(await f.store.queue.retry({ txid: later.txid, now: T0, leaseMs: LEASE_MS })).toEqual({
          changed: 0,
          inFlight: 1,
        })
        expect(await f.store.queue.retry({ now: T0, leaseMs: LEASE_MS })).toEqual({ changed: 0, inFlight: 1 })
        expect(await f.store.queue.retry({ txid: 'f'.repeat(18), now: T0, leaseMs: LEASE_MS })).toBeUndefined()
      })

      it('retries every waiting recipient without a txid', async () => {
        const a = await deferred()
        const b = await deferred(['one@b.example', 'two@b.example'])
        expect(await f.store.queue.retry({ now: T0, leaseMs: LEASE_MS })).toEqual({ changed: 3, inFlight: 0 })
        expect(ids(await claim('node-a', T0))).toEqual([...a.ids, ...b.ids].sort((x, y) => x - y))
      })

      it('fails waiting recipients for good on cancel, drops the bytes, and leaves a leased row to its worker', async () => {
        const m = newMessage(f, { recipients: ['held@b.example', 'later@b.example'] })
        const { rowId, leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
        const [held, later] = leased!
        await f.store.queue.record([outcome(later.id, 'deferred', T0 + 3_600_000)])
        const cancel = () =>
          f.store.queue.cancel({ txid: m.txid, now: T0, leaseMs: LEASE_MS, response: 'canceled by the operator' })
        expect(await cancel()).toEqual({ changed: 1, inFlight: 1 })
        expect(await f.store.queue.body(rowId)).toBeDefined()
        await f.store.queue.record([outcome(held.id, 'deferred', T0 + 3_600_000)])
        expect(await cancel()).toEqual({ changed: 1, inFlight: 0 })
        expect(await f.store.queue.body(rowId)).toBeUndefined()
        expect(await f.store.queue.waiting({ now: T0, leaseMs: LEASE_MS })).toEqual([])
        expect((await logOf(f)).rows.map((r) => [r.to, r.delivered, r.response])).toEqual([
          ['held@b.example', 0, 'canceled by the operator'],
          ['later@b.example', 0, 'canceled by the operator'],
        ])
        expect(
          await f.store.queue.cancel({ txid: 'f'.repeat(18), now: T0, leaseMs: LEASE_MS, response: 'x' }),
        ).toBeUndefined()
      })
    })
  })
}
