import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { AttemptOutcome, LogQuery, NewMessage, Store } from '../../storage/store.js'

/** A store opened for one test: its own empty database, and a second connection to it when the backend has one. */
export interface OpenedStore {
  store: Store
  close(): Promise<void>
  /** Another connection to the same database (another process or node); the suite closes it. */
  reopen?(): Promise<Store>
}

/** What the suite's tests share: filled in before each test. */
interface Fixture {
  opened: OpenedStore
  store: Store
  accountId: number
  orderId: number
  /** An order of another account. */
  otherOrderId: number
  otherAccountId: number
  /** Opens another connection to the same database, closed after the test. */
  another(): Promise<Store>
}

const LEASE_MS = 60_000
/** A fixed moment, so that times in the answers are known. */
const T0 = Date.UTC(2026, 0, 5, 12)

/**
 * What any Store backend must do, stated through the Store interface alone: registers the suite
 * under `name`, each test with a fresh database from `open`.
 */
export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`Store contract: ${name}`, () => {
    const f = {} as Fixture
    let others: Store[] = []
    beforeEach(async () => {
      f.opened = await open()
      f.store = f.opened.store
      const account = (accountName: string) =>
        f.store.accounts.create({
          name: accountName,
          currency: 'USD',
          priceBase: 1,
          pricePerMessage: 0.0002,
          billingDay: 1,
          createdAt: T0,
        })
      f.accountId = (await account('a')).id
      f.otherAccountId = (await account('b')).id
      const order = async (accountId: number) =>
        (await f.store.orders.create({ accountId, comment: null, senders: [], now: T0 })).order.id
      f.orderId = await order(f.accountId)
      f.otherOrderId = await order(f.otherAccountId)
      f.another = async () => {
        if (!f.opened.reopen) throw new Error(`${name} cannot open a second connection`)
        const other = await f.opened.reopen()
        others.push(other)
        return other
      }
    })
    afterEach(async () => {
      for (const other of others) await other.close()
      others = []
      await f.opened.close()
    })

    queueContract(f)
  })
}

let sequence = 0
/** A message of the fixture's order (or of `overrides`' order), accepted at `T0` unless told. */
export function newMessage(f: Pick<Fixture, 'accountId' | 'orderId'>, overrides: Partial<NewMessage> = {}): NewMessage {
  sequence++
  return {
    txid: randomBytes(9).toString('hex'),
    accountId: f.accountId,
    orderId: f.orderId,
    envFrom: 'sender@a.example',
    recipients: ['rcpt@b.example'],
    headerFrom: null,
    replyTo: null,
    subject: `message ${sequence}`,
    messageId: null,
    origin: '192.0.2.1',
    transtype: 'HTTP',
    interface: 'api',
    sendingZone: 'default',
    raw: [Buffer.from(`Subject: message ${sequence}\r\n\r\nbody\r\n`)],
    time: T0,
    ...overrides,
  }
}

/** The outcome of an attempt on row `id`, as delivery records it. */
const outcome = (id: number, state: AttemptOutcome['state'], nextAttemptAt: number | null = null): AttemptOutcome => ({
  id,
  state,
  code: { delivered: 250, deferred: 451, failed: 550 }[state],
  response: { delivered: '2.0.0 ok', deferred: '4.7.1 try again later', failed: '5.1.1 no such user' }[state],
  mxHostname: `mx.${state}.example`,
  nextAttemptAt: state === 'deferred' ? nextAttemptAt : null,
})

/** The log of the fixture's order, one row per recipient, oldest first. */
const logOf = (f: Fixture, query: Partial<LogQuery> = {}) =>
  f.store.mail.log({
    orderId: f.orderId,
    skip: 0,
    limit: 1000,
    dir: 'asc',
    groupby: 'recipient',
    ...query,
  })

function queueContract(f: Fixture) {
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

    it('drops the bytes of a message once every recipient is final, and not before', async () => {
      const { rowId } = await f.store.mail.enqueue(
        newMessage(f, { recipients: ['one@b.example', 'two@b.example', 'three@b.example'] }),
      )
      const [one, two, three] = (await claim('node-a', T0)).sort((a, b) => a.id - b.id)
      await f.store.queue.record([outcome(one.id, 'delivered'), outcome(two.id, 'deferred', T0 + 1000)])
      expect(await f.store.queue.body(rowId)).toBeDefined()
      await f.store.queue.record([outcome(three.id, 'failed')])
      expect(await f.store.queue.body(rowId)).toBeDefined()
      const [again] = await claim('node-a', T0 + 1000)
      await f.store.queue.record([outcome(again.id, 'delivered')])
      expect(await f.store.queue.body(rowId)).toBeUndefined()
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
