import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
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
  /** A live API key of the fixture's account. */
  apiKey: string
  /** Opens another connection to the same database, closed after the test. */
  another(): Promise<Store>
}

const LEASE_MS = 60_000
/** A fixed moment, so that times in the answers are known. */
const T0 = Date.UTC(2026, 0, 5, 12)
/**
 * A change made through one connection is in force on every other within a second: a key revoked,
 * a rule added or an order canceled on one node or with the CLI holds on every node.
 */
const CHANGE_SEEN_WITHIN_MS = 1000

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
      f.apiKey = (await f.store.apiKeys.create(f.accountId, T0)).key
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

    identityContract(f)
    queueContract(f)
    logContract(f)
    rulesContract(f)
    blocksContract(f)
    trapsContract(f)
    spamFilterContract(f)
    settingsContract(f)
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
const logOf = (f: Fixture, query: Partial<LogQuery> = {}, store = f.store) =>
  store.mail.log({
    orderId: f.orderId,
    skip: 0,
    limit: 1000,
    dir: 'asc',
    groupby: 'recipient',
    ...query,
  })

function identityContract(f: Fixture) {
  describe('accounts, API keys, orders and sending domains', () => {
    it('keeps accounts, and authenticates a key until it is revoked, by id or by prefix', async () => {
      expect((await f.store.accounts.list()).map((a) => [a.id, a.name])).toEqual([
        [f.accountId, 'a'],
        [f.otherAccountId, 'b'],
      ])
      expect(await f.store.accounts.get(f.otherAccountId)).toMatchObject({ name: 'b', billingDay: 1 })
      expect(await f.store.accounts.get(f.otherAccountId + 1000)).toBeUndefined()
      const second = await f.store.apiKeys.create(f.accountId, T0 + 1)
      expect(second.key.startsWith(second.info.prefix)).toBe(true)
      expect(await f.store.apiKeys.authenticate(second.key)).toBe(f.accountId)
      expect(await f.store.apiKeys.authenticate(`${second.key}x`)).toBeUndefined()
      const [first] = await f.store.apiKeys.list(f.accountId)
      expect(await f.store.apiKeys.revoke(first.id, T0 + 2)).toBe(true)
      expect(await f.store.apiKeys.revoke(first.id, T0 + 3)).toBe(false)
      expect(await f.store.apiKeys.authenticate(f.apiKey)).toBeUndefined()
      expect(await f.store.apiKeys.revoke(second.info.prefix, T0 + 2)).toBe(true)
      expect(await f.store.apiKeys.authenticate(second.key)).toBeUndefined()
      expect((await f.store.apiKeys.list(f.accountId)).map((k) => k.revokedAt)).toEqual([T0 + 2, T0 + 2])
      expect(await f.store.apiKeys.list(f.otherAccountId)).toEqual([])
    })

    it("keeps an order's password, status and senders, lowercased", async () => {
      const { order, password } = await f.store.orders.create({
        accountId: f.accountId,
        comment: 'newsletter',
        senders: ['News@A.example', 'news@a.example', '@B.example'],
        now: T0,
      })
      expect(order).toMatchObject({ accountId: f.accountId, status: 'active', comment: 'newsletter', createdAt: T0 })
      expect([...order.senders].sort()).toEqual(['@b.example', 'news@a.example'])
      expect(await f.store.orders.password(order.id)).toBe(password)
      expect(await f.store.orders.password(f.orderId)).not.toBe(password)
      expect(await f.store.orders.addSender(order.id, 'NEWS@a.example')).toBe(false)
      expect(await f.store.orders.removeSender(order.id, '@B.EXAMPLE')).toBe(true)
      expect(await f.store.orders.setStatus(order.id, 'canceled')).toBe(true)
      expect(await f.store.orders.get(order.id)).toMatchObject({ status: 'canceled', senders: ['news@a.example'] })
      expect((await f.store.orders.list(f.accountId)).map((o) => [o.id, o.status])).toEqual([
        [f.orderId, 'active'],
        [order.id, 'canceled'],
      ])
      expect(await f.store.orders.get(order.id + 1000)).toBeUndefined()
    })

    it("signs a domain's mail with its oldest key, and keeps the domain to the account that has it", async () => {
      const add = (selector: string, accountId = f.accountId, now = T0) =>
        f.store.domains.addKey({ domain: 'a.example', accountId, selector, algorithm: 'ed25519', ...ed25519(), now })
      const first = await add('s1')
      await add('s2', f.accountId, T0 + 1)
      await expect(add('s1', f.accountId, T0 + 2)).rejects.toThrow()
      await expect(add('s3', f.otherAccountId)).rejects.toThrow()
      expect((await f.store.domains.keys('a.example')).map((k) => k.selector)).toEqual(['s1', 's2'])
      expect(await f.store.domains.list(f.otherAccountId)).toEqual([])
      const signing = await f.store.domains.signingKey('a.example')
      expect(signing).toMatchObject(first)
      expect(signing?.privateKey).toMatch(/^-----BEGIN PRIVATE KEY-----/)
      expect(await f.store.domains.remove('a.example', 's1')).toBe(true)
      expect((await f.store.domains.signingKey('a.example'))?.selector).toBe('s2')
      // The last key takes the domain with it: another account may have it then.
      expect(await f.store.domains.remove('a.example', 's2')).toBe(true)
      expect(await f.store.domains.keys('a.example')).toEqual([])
      await add('s1', f.otherAccountId)
      expect((await f.store.domains.list(f.otherAccountId)).map((k) => k.domain)).toEqual(['a.example'])
      expect(await f.store.domains.remove('a.example')).toBe(true)
      expect(await f.store.domains.signingKey('a.example')).toBeUndefined()
    })
  })
}

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

function logContract(f: Fixture) {
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
        expect(theirs.rows.every((r) => r.user === `mb${f.otherOrderId}`)).toBe(true)
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

function rulesContract(f: Fixture) {
  describe('deny rules', () => {
    it('creates a rule once, its value lowercased, and lists the rules of the orders asked', async () => {
      const rule = await f.store.rules.create({ orderId: f.orderId, type: 'domain', data: 'Spam.Example', now: T0 })
      expect(rule).toMatchObject({ orderId: f.orderId, type: 'domain', data: 'spam.example', createdAt: T0 })
      // The same rule again, in any case, is the one there.
      expect(
        await f.store.rules.create({ orderId: f.orderId, type: 'domain', data: 'SPAM.example', now: T0 + 1 }),
      ).toEqual(rule)
      const email = await f.store.rules.create({ orderId: f.orderId, type: 'email', data: 'spam.example', now: T0 })
      const theirs = await f.store.rules.create({
        orderId: f.otherOrderId,
        type: 'startswith',
        data: 'news',
        now: T0,
      })
      expect(await f.store.rules.list([f.orderId])).toEqual([rule, email])
      expect(await f.store.rules.list([f.otherOrderId])).toEqual([theirs])
      expect(await f.store.rules.list([f.orderId, f.otherOrderId])).toEqual([rule, email, theirs])
      expect(await f.store.rules.list([])).toEqual([])
    })

    it('deletes a rule only for the orders it belongs to', async () => {
      const rule = await f.store.rules.create({ orderId: f.orderId, type: 'destination', data: 'x.example', now: T0 })
      expect(await f.store.rules.delete(rule.id, [f.otherOrderId])).toBe(false)
      expect(await f.store.rules.delete(rule.id, [])).toBe(false)
      expect(await f.store.rules.list([f.orderId])).toEqual([rule])
      expect(await f.store.rules.delete(rule.id, [f.otherOrderId, f.orderId])).toBe(true)
      expect(await f.store.rules.delete(rule.id, [f.orderId])).toBe(false)
      expect(await f.store.rules.list([f.orderId])).toEqual([])
    })
  })
}

function blocksContract(f: Fixture) {
  describe('block lists', () => {
    const add = (kind: 'sender' | 'recipient', address: string, source: 'external' | 'internal' = 'internal') =>
      f.store.blocks.addToList({ accountId: f.accountId, source, kind, address, reason: `${kind} ${address}`, now: T0 })

    it('answers for an address in any case, of the account and the kind it was listed for', async () => {
      await add('sender', 'Spam@A.example', 'external')
      await add('recipient', 'Gone@B.example')
      const sender = { source: 'external', kind: 'sender', address: 'spam@a.example', reason: 'sender Spam@A.example' }
      expect(await f.store.blocks.blockedSender(f.accountId, 'SPAM@a.EXAMPLE')).toMatchObject(sender)
      expect(await f.store.blocks.suppressed(f.accountId, 'gone@b.example')).toMatchObject({
        kind: 'recipient',
        address: 'gone@b.example',
      })
      expect(await f.store.blocks.suppressed(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.blockedSender(f.accountId, 'gone@b.example')).toBeUndefined()
      expect(await f.store.blocks.blockedSender(f.otherAccountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.suppressed(f.otherAccountId, 'gone@b.example')).toBeUndefined()
    })

    it('lists the entries of a kind by address, and removes one', async () => {
      await add('recipient', 'b@b.example')
      await add('recipient', 'a@b.example', 'external')
      await add('recipient', 'a@b.example')
      await add('sender', 'c@b.example')
      const listed = async () =>
        (await f.store.blocks.listEntries(f.accountId, 'recipient')).map((e) => [e.address, e.source])
      expect((await listed()).sort()).toEqual([
        ['a@b.example', 'external'],
        ['a@b.example', 'internal'],
        ['b@b.example', 'internal'],
      ])
      expect((await listed()).map(([address]) => address)).toEqual(['a@b.example', 'a@b.example', 'b@b.example'])
      expect(await f.store.blocks.listEntries(f.otherAccountId, 'recipient')).toEqual([])
      expect(await f.store.blocks.removeFromList(f.accountId, 'B@b.example', 'sender')).toBe(false)
      expect(await f.store.blocks.removeFromList(f.accountId, 'B@b.example', 'recipient')).toBe(true)
      expect(await f.store.blocks.removeFromList(f.accountId, 'b@b.example', 'recipient')).toBe(false)
      expect(await f.store.blocks.suppressed(f.accountId, 'b@b.example')).toBeUndefined()
    })

    it("delists an address from the account's lists and events, and counts what went", async () => {
      await add('sender', 'spam@a.example')
      await add('recipient', 'spam@a.example')
      const event = { envFrom: 'Spam@a.example', messageId: null, subject: 'x', rcptTo: 'r@b.example' }
      await f.store.blocks.addEvent(f.accountId, { ...event, rule: 'MBTRAP', createdAt: T0 })
      await f.store.blocks.addEvent(f.otherAccountId, { ...event, rule: 'MBTRAP', createdAt: T0 })
      expect(await f.store.blocks.delist(f.accountId, 'SPAM@a.example')).toBe(3)
      expect(await f.store.blocks.blockedSender(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.suppressed(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', 0)).toEqual([])
      expect(await f.store.blocks.events(f.otherAccountId, 'MBTRAP', 0)).toHaveLength(1)
      expect(await f.store.blocks.delist(f.accountId, 'spam@a.example')).toBe(0)
    })

    it('keeps spam-filter events of an account and a rule, newest first, and prunes the old', async () => {
      const event = (rule: 'MBTRAP' | 'LOCAL_BL_RCPT', createdAt: number) => ({
        rule,
        createdAt,
        envFrom: 'from@a.example',
        messageId: `<${createdAt}@a.example>`,
        subject: 'subject',
        rcptTo: 'to@b.example',
      })
      for (const e of [event('MBTRAP', T0), event('MBTRAP', T0 + 2000), event('LOCAL_BL_RCPT', T0 + 1000)])
        await f.store.blocks.addEvent(f.accountId, e)
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', T0)).toEqual([
        event('MBTRAP', T0 + 2000),
        event('MBTRAP', T0),
      ])
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', T0 + 1)).toEqual([event('MBTRAP', T0 + 2000)])
      expect(await f.store.blocks.events(f.otherAccountId, 'MBTRAP', 0)).toEqual([])
      expect(await f.store.blocks.prune(T0 + 1000)).toBe(1)
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', 0)).toEqual([event('MBTRAP', T0 + 2000)])
      expect(await f.store.blocks.events(f.accountId, 'LOCAL_BL_RCPT', 0)).toEqual([event('LOCAL_BL_RCPT', T0 + 1000)])
    })
  })
}

function trapsContract(f: Fixture) {
  describe('traps', () => {
    it('catches an address itself or anyone at a trapped domain, in any case', async () => {
      expect(await f.store.traps.add('Trap@A.example', T0)).toBe(true)
      expect(await f.store.traps.add('trap@a.example', T0)).toBe(false)
      expect(await f.store.traps.add('@Spam.example', T0)).toBe(true)
      expect(await f.store.traps.list()).toEqual(['@spam.example', 'trap@a.example'])
      for (const [address, trap] of [
        ['TRAP@a.example', 'trap@a.example'],
        ['other@a.example', undefined],
        ['anyone@SPAM.example', '@spam.example'],
        ['anyone@sub.spam.example', undefined],
      ] as const)
        expect(await f.store.traps.match(address)).toBe(trap)
      expect(await f.store.traps.remove('TRAP@a.example')).toBe(true)
      expect(await f.store.traps.remove('trap@a.example')).toBe(false)
      expect(await f.store.traps.match('trap@a.example')).toBeUndefined()
      expect(await f.store.traps.list()).toEqual(['@spam.example'])
    })
  })
}

function spamFilterContract(f: Fixture) {
  describe('spam-filter subject counts', () => {
    const THRESHOLD = 2
    const take = (envFrom: string, subject = 'FREE MONEY', createdAt = T0, since = T0 - 1000, store = f.store) =>
      store.blocks.takeSubject(
        f.accountId,
        { envFrom, subject, createdAt, messageId: null, rcptTo: 'r@b.example' },
        since,
        THRESHOLD,
      )

    it('lets a sender send a subject as many times as the threshold allows, in any case of its address', async () => {
      const answers = []
      for (const from of ['s@a.example', 'S@a.example', 's@A.EXAMPLE', 's@a.example']) answers.push(await take(from))
      expect(answers).toEqual([true, true, true, false])
      // Reported once past the threshold: the sender has sent it THRESHOLD + 1 times.
      expect(await f.store.blocks.subjectPairs(f.accountId, T0 - 1000, THRESHOLD)).toEqual([
        { from: 's@a.example', subject: 'FREE MONEY' },
      ])
      expect(await f.store.blocks.subjectPairs(f.accountId, T0 - 1000, THRESHOLD + 1)).toEqual([])
      // Another subject, another sender, another account, or events before the window: counted apart.
      expect(await take('s@a.example', 'free money')).toBe(true)
      expect(await take('t@a.example')).toBe(true)
      expect(await take('s@a.example', 'FREE MONEY', T0 + 60_000, T0 + 1)).toBe(true)
      expect(
        await f.store.blocks.takeSubject(
          f.otherAccountId,
          { envFrom: 's@a.example', subject: 'FREE MONEY', createdAt: T0, messageId: null, rcptTo: 'r@b.example' },
          0,
          THRESHOLD,
        ),
      ).toBe(true)
    })

    it('counts concurrent sends through two connections as one', async () => {
      const other = await f.another()
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => take('s@a.example', 'FREE MONEY', T0, T0 - 1000, i % 2 ? other : f.store)),
      )
      expect(answers.filter(Boolean)).toHaveLength(THRESHOLD + 1)
      expect(await f.store.blocks.events(f.accountId, 'SUBJECT', 0)).toHaveLength(THRESHOLD + 1)
    })
  })
}

/** Reads until `read` answers `expected`, for as long as a change may take to be seen; resolves with the last answer. */
async function seen<T>(read: () => Promise<T>, expected: T): Promise<T> {
  const deadline = Date.now() + CHANGE_SEEN_WITHIN_MS
  for (;;) {
    const value = await read()
    try {
      expect(value).toEqual(expected)
      return value
    } catch (err) {
      if (Date.now() >= deadline) throw err
    }
    await sleep(10)
  }
}

/** A change to the settings every send reads, through `other`, and how a store reads it. */
interface SettingChange {
  read(f: Fixture, store: Store): Promise<unknown>
  change(f: Fixture, other: Store): Promise<unknown>
  /** Takes the change back, where the store can. */
  undo?(f: Fixture, other: Store): Promise<unknown>
}

const ed25519 = () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64'),
  }
}

/** A field of the fixture's order, read one by one and in the account's list. */
const orderRead =
  (field: 'status' | 'senders'): SettingChange['read'] =>
  async (f, store) => [(await store.orders.get(f.orderId))?.[field], (await store.orders.list(f.accountId))[0][field]]

/** Puts an address on the fixture account's internal list. */
const listInternally =
  (kind: 'sender' | 'recipient', address: string, reason: string): SettingChange['change'] =>
  (f, other) =>
    other.blocks.addToList({ accountId: f.accountId, source: 'internal', kind, address, reason, now: T0 })

const SETTING_CHANGES: [string, SettingChange][] = [
  [
    'an API key revoked',
    {
      read: async (f, store) => store.apiKeys.authenticate(f.apiKey),
      change: async (f, other) => other.apiKeys.revoke((await other.apiKeys.list(f.accountId))[0].id, T0),
    },
  ],
  [
    'an order canceled',
    {
      read: orderRead('status'),
      change: (f, other) => other.orders.setStatus(f.orderId, 'canceled'),
      undo: (f, other) => other.orders.setStatus(f.orderId, 'active'),
    },
  ],
  [
    "an order's authorized sender",
    {
      read: orderRead('senders'),
      change: (f, other) => other.orders.addSender(f.orderId, 'Boss@A.example'),
      undo: (f, other) => other.orders.removeSender(f.orderId, 'boss@a.example'),
    },
  ],
  [
    'a deny rule',
    {
      read: async (f, store) => (await store.rules.list([f.orderId])).map((r) => r.data),
      change: (f, other) => other.rules.create({ orderId: f.orderId, type: 'domain', data: 'c.example', now: T0 }),
      undo: async (f, other) => other.rules.delete((await other.rules.list([f.orderId]))[0].id, [f.orderId]),
    },
  ],
  [
    'a blocked sender',
    {
      read: async (f, store) => (await store.blocks.blockedSender(f.accountId, 'Spam@a.example'))?.reason,
      change: listInternally('sender', 'spam@a.example', 'trap hit'),
      undo: (f, other) => other.blocks.delist(f.accountId, 'spam@a.example'),
    },
  ],
  [
    'a suppressed recipient',
    {
      read: async (f, store) => (await store.blocks.suppressed(f.accountId, 'gone@b.example'))?.reason,
      change: listInternally('recipient', 'gone@b.example', 'bounced'),
      undo: (f, other) => other.blocks.removeFromList(f.accountId, 'gone@b.example', 'recipient'),
    },
  ],
  [
    'a trap',
    {
      read: async (_f, store) => store.traps.match('anyone@trap.example'),
      change: (_f, other) => other.traps.add('@trap.example', T0),
      undo: (_f, other) => other.traps.remove('@trap.example'),
    },
  ],
  [
    'a DKIM key',
    {
      read: async (_f, store) => (await store.domains.signingKey('a.example'))?.selector,
      change: (f, other) =>
        other.domains.addKey({
          domain: 'a.example',
          accountId: f.accountId,
          selector: 's1',
          algorithm: 'ed25519',
          ...ed25519(),
          now: T0,
        }),
      undo: (_f, other) => other.domains.remove('a.example'),
    },
  ],
]

function settingsContract(f: Fixture) {
  describe('settings changed through another connection', () => {
    it.each(SETTING_CHANGES)('sees a change made through the other: %s, and its undoing', async (_label, setting) => {
      const other = await f.another()
      // Read first: a backend that keeps what it read must notice the other connection's change.
      const before = await setting.read(f, f.store)
      await setting.change(f, other)
      const after = await setting.read(f, other)
      expect(after).not.toEqual(before)
      await seen(() => setting.read(f, f.store), after)
      if (!setting.undo) return
      await setting.undo(f, other)
      expect(await setting.read(f, other)).toEqual(before)
      await seen(() => setting.read(f, f.store), before)
    })

    it("sees its own connection's changes at once", async () => {
      for (const [, setting] of SETTING_CHANGES) {
        const before = await setting.read(f, f.store)
        await setting.change(f, f.store)
        expect(await setting.read(f, f.store)).not.toEqual(before)
      }
    })
  })
}
