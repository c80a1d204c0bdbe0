import { dkimVerify } from 'mailauth/lib/dkim/verify.js'
import { simpleParser } from 'mailparser'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { DeliveryWorker } from '../../relay/delivery.js'
import { dnsRecords, generateDkimKey } from '../../relay/dkim.js'
import type { MxResolver } from '../../relay/routes.js'
import { SANDBOX_DOMAIN } from '../../relay/sandbox.js'
import type { LogRow } from '../../storage/store.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { startMuteMx, startSink, stubResolver } from './sink.js'
import { resolverOf } from './inbound-support.js'
import { relayTo } from './worker-relay.js'

/** The default MAILROOM_LEASE_TIMEOUT, which these workers run with. */
const LEASE_TIMEOUT = 10 * 60_000

const MIN = 60_000

describe('delivery', () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup(options: {
    resolver: (port: number) => MxResolver
    port?: number
    env?: Record<string, string>
    /** Where the worker's log lines (parsed) go. */
    log?: Record<string, unknown>[]
  }) {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const port = options.port ?? sink.port
    const env: TestEnv = await createTestEnv({
      MAILROOM_MX_PORT: String(port),
      // The stub zones put the MX hosts on loopback, where the sinks listen.
      MAILROOM_ALLOW_PRIVATE_MX: 'true',
      MAILROOM_RETRY_SCHEDULE: '5m,10m',
      MAILROOM_MAX_QUEUE_AGE: '1h',
      MAILROOM_DELIVERY_TIMEOUT: '5s',
      ...options.env,
    })
    cleanup.push(() => env.close())
    // How many rows each claim leased.
    const claimed: number[] = []
    const { claim } = env.services.store.queue
    env.services.store.queue.claim = async (input) => {
      const items = await claim(input)
      claimed.push(items.length)
      return items
    }
    const { log } = options
    const logger = log
      ? pino({ level: 'info' }, { write: (line: string) => void log.push(JSON.parse(line)) })
      : undefined
    const worker = new DeliveryWorker({
      ...env.services,
      resolver: options.resolver(port),
      logger: logger ?? env.services.logger,
    })
    cleanup.push(() => worker.stop())
    await worker.start()
    const { send } = relayTo(env, worker)
    const rows = async (mailid: string) =>
      (
        await env.services.store.mail.log({
          orderId: env.orderId,
          mailid,
          skip: 0,
          limit: 100,
          dir: 'asc',
          groupby: 'recipient',
        })
      ).rows
    /** Waits until every row of the message has had `attempts` attempts (or is final). */
    const settled = async (mailid: string, check: (r: LogRow[]) => boolean) => {
      await expect.poll(async () => check(await rows(mailid)), { timeout: 15_000, interval: 50 }).toBe(true)
      return rows(mailid)
    }
    /** Moves the clock past the next retry and wakes the worker. */
    const later = (ms: number) => {
      env.clock.advance(ms)
      worker.kick()
    }
    return { sink, env, worker, send, rows, settled, later, claimed }
  }

  /** The rows of a message still to deliver (a report to its sender is a message of its own). */
  const waitingOf = async (t: Awaited<ReturnType<typeof setup>>, txid: string) =>
    (await t.env.services.store.queue.waiting({ now: t.env.clock(), leaseMs: LEASE_TIMEOUT })).filter(
      (w) => w.txid === txid,
    )

  const local = (_port: number, domains: string[] = ['example.com']) =>
    stubResolver({
      mx: Object.fromEntries(domains.map((d) => [d, [{ exchange: `mx.${d}`, priority: 10 }]])),
      a: Object.fromEntries(domains.map((d) => [`mx.${d}`, ['127.0.0.1']])),
    })

  it('keeps the leases of rows it holds past MAILROOM_LEASE_TIMEOUT (a slow host): its own claim does not take them again', async () => {
    const t = await setup({
      resolver: (p) => local(p),
      env: { MAILROOM_DOMAIN_CONCURRENCY: '1', MAILROOM_DELIVERY_TIMEOUT: '60s' },
    })
    let answer = () => {}
    t.sink.state.hold = new Promise<void>((resolve) => (answer = resolve))
    // One message in delivery, its reply held; the next waits in memory for the one connection.
    const first = await t.send(['slow1@example.com'])
    const second = await t.send(['slow2@example.com'])
    await expect.poll(() => t.sink.state.received, { timeout: 10_000 }).toBe(1)
    // Both still leased when the lease timeout has passed: a claim must take neither.
    const claims = t.claimed.length
    t.later(LEASE_TIMEOUT + MIN)
    await expect.poll(() => t.claimed.length, { timeout: 10_000 }).toBeGreaterThan(claims)
    expect(t.claimed.slice(claims)).toEqual(t.claimed.slice(claims).map(() => 0))
    answer()
    for (const txid of [first, second])
      expect(
        (await t.settled(txid, (r) => r.every((x) => x.delivered === 1))).map((r) => [r.delivered, r.code]),
      ).toEqual([[1, 250]])
    await new Promise((r) => setTimeout(r, 300))
    expect(t.sink.messages.map((m) => m.to)).toEqual([['slow1@example.com'], ['slow2@example.com']])
    // Lease times are epoch milliseconds as text, whichever way a row was leased.
    const { sqlite } = t.env.services.store as unknown as { sqlite: import('better-sqlite3').Database }
    expect(sqlite.prepare('SELECT lock_time FROM deliveries').pluck().all()).toEqual([
      expect.stringMatching(/^\d+$/),
      expect.stringMatching(/^\d+$/),
    ])
  })

  it('at stop, finishes the deliveries under way and hands the rows it had not started back to the queue, for any node', async () => {
    const t = await setup({ resolver: (p) => local(p), env: { MAILROOM_DOMAIN_CONCURRENCY: '1' } })
    let answer = () => {}
    t.sink.state.hold = new Promise<void>((resolve) => (answer = resolve))
    // The first's reply is held; the second, started once the first was out, waits for that
    // reply on the one connection; the third waits in memory for the second to be out.
    const txids = [
      await t.send(['one@example.com']),
      await t.send(['two@example.com']),
      await t.send(['three@example.com']),
    ]
    await expect.poll(() => t.sink.state.received, { timeout: 10_000 }).toBe(1)
    const stopped = t.worker.stop()
    answer()
    await stopped
    const rows = await Promise.all(txids.map((txid) => t.rows(txid)))
    expect(rows.map(([r]) => [r.recipient, r.delivered, r.locked])).toEqual([
      ['one@example.com', 1, 0],
      ['two@example.com', 1, 0],
      ['three@example.com', 0, 0],
    ])
    expect(t.sink.messages.map((m) => m.to)).toEqual([['one@example.com'], ['two@example.com']])
    // Not leased: another node's claim takes it now, not once the lease would have expired.
    const claimed = await t.env.services.store.queue.claim({
      node: 'other',
      now: t.env.clock(),
      leaseMs: LEASE_TIMEOUT,
      limit: 10,
    })
    expect(claimed.map((i) => i.recipient)).toEqual(['three@example.com'])
  })

  it('never rewrites a final row with a late outcome', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    const txid = await t.send(['a@example.com'])
    const [row] = await t.settled(txid, (r) => r.every((x) => x.delivered === 1))
    await t.env.services.store.queue.record([
      {
        id: row._id,
        state: 'failed',
        code: 554,
        response: '554 5.3.0 late',
        mxHostname: null,
        nextAttemptAt: null,
        time: t.env.clock(),
      },
    ])
    expect((await t.rows(txid)).map((r) => [r.delivered, r.code])).toEqual([[1, 250]])
  })

  it('delivers to the MX and records it on the log row', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    const txid = await t.send(['a@example.com', 'b@example.com'])
    const rows = await t.settled(txid, (r) => r.every((x) => x.delivered === 1))
    expect(rows.map((r) => [r.recipient, r.delivered, r.code, r.mxHostname, r.assigned])).toEqual([
      ['a@example.com', 1, 250, 'mx.example.com', t.env.config.nodeName],
      ['b@example.com', 1, 250, 'mx.example.com', t.env.config.nodeName],
    ])
    expect(rows[0].response).toMatch(/^250 .*queued as SINK1/)
    expect(rows[0].locked).toBe(0)
    // One transaction for both recipients at the domain, with the right envelope and bytes.
    expect(t.sink.messages).toHaveLength(1)
    expect(t.sink.messages[0]).toMatchObject({ from: 'sender@example.org', to: ['a@example.com', 'b@example.com'] })
    expect(t.sink.messages[0].raw.toString()).toContain('Subject: delivery test')
    expect(await t.env.services.store.queue.pending()).toBe(0)
  })

  it('records outcomes a moment after the transaction, and always before stop() returns', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    const txids = [await t.send(['a@example.com']), await t.send(['b@example.com']), await t.send(['c@example.com'])]
    await expect.poll(() => t.sink.messages.length, { interval: 5 }).toBe(3)
    // Stopped the moment the last message reached the MX: its outcome is committed all the same.
    await t.worker.stop()
    for (const txid of txids)
      expect((await t.rows(txid)).map((r) => [r.delivered, r.code, r.locked])).toEqual([[1, 250, 0]])
    expect(await t.env.services.store.queue.pending()).toBe(0)
  })

  it('defers a 4xx and delivers on the retry', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.rcptRule = () => ({ code: 451, message: '4.7.1 Greylisted, try again later' })
    const txid = await t.send(['a@example.com'])
    let [row] = await t.settled(txid, (r) => r[0].code === 451)
    expect(row).toMatchObject({ delivered: 0, code: 451, response: expect.stringContaining('Greylisted'), locked: 0 })
    t.sink.state.rcptRule = undefined
    // Not before the schedule says so…
    t.later(4 * MIN)
    await new Promise((r) => setTimeout(r, 300))
    expect(t.sink.messages).toHaveLength(0)
    // …but after it.
    t.later(2 * MIN)
    ;[row] = await t.settled(txid, (r) => r[0].delivered === 1)
    expect(row.code).toBe(250)
    expect(t.sink.messages).toHaveLength(1)
  })

  it('fails a 5xx at once, keeping its code and response', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.dataRule = () => ({ code: 554, message: '5.7.1 Message rejected as spam' })
    const txid = await t.send(['a@example.com'])
    const [row] = await t.settled(txid, (r) => r[0].code === 554)
    expect(row).toMatchObject({ delivered: 0, code: 554, response: expect.stringContaining('rejected as spam') })
    expect(await waitingOf(t, txid)).toEqual([])
    // Not a "user unknown": nobody is suppressed.
    expect(await t.env.services.store.blocks.delist(t.env.accountId, 'a@example.com')).toBe(0)
  })

  it('puts a recipient the MX does not know on the local block list', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.rcptRule = (rcpt) =>
      rcpt === 'gone@example.com'
        ? { code: 550, message: '5.1.1 <gone@example.com>: Recipient address rejected: User unknown' }
        : undefined
    const txid = await t.send(['gone@example.com', 'here@example.com'])
    const rows = await t.settled(txid, (r) => r.every((x) => x.code !== null))
    expect(rows.map((r) => [r.recipient, r.delivered, r.code])).toEqual([
      ['gone@example.com', 0, 550],
      ['here@example.com', 1, 250],
    ])
    expect(t.sink.messages[0].to).toEqual(['here@example.com'])
    const list = t.env.services.store as unknown as { sqlite: import('better-sqlite3').Database }
    expect(list.sqlite.prepare('SELECT address, kind, source, reason FROM block_list').all()).toEqual([
      {
        address: 'gone@example.com',
        kind: 'recipient',
        source: 'internal',
        reason:
          'an earlier message to it bounced: 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown',
      },
    ])
  })

  it('suppresses no recipient for a "user unknown" about the sender at MAIL FROM', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.mailRule = (from) => ({
      code: 550,
      message: `5.1.0 <${from}>: Sender address rejected: User unknown in local recipient table`,
    })
    const txid = await t.send(['alice@example.com', 'bob@example.com'])
    const rows = await t.settled(txid, (r) => r.every((x) => x.code !== null))
    expect(rows.map((r) => [r.recipient, r.delivered, r.code])).toEqual([
      ['alice@example.com', 0, 550],
      ['bob@example.com', 0, 550],
    ])
    const list = t.env.services.store as unknown as { sqlite: import('better-sqlite3').Database }
    expect(list.sqlite.prepare('SELECT COUNT(*) FROM block_list').pluck().get()).toBe(0)
  })

  it('retries when the MX is down, and delivers once it is up', async () => {
    // Nothing listens on the port at first: the sink is started later on the same port.
    const probe = await startSink()
    const port = probe.port
    await probe.close()
    const t = await setup({ resolver: (p) => local(p), port })
    const txid = await t.send(['a@example.com'])
    let [row] = await t.settled(txid, (r) => r[0].response !== null)
    expect(row).toMatchObject({ delivered: 0, code: null, response: expect.stringMatching(/ECONNREFUSED|connect/i) })
    const up = await startSinkOn(port)
    cleanup.push(() => up.close())
    t.later(5 * MIN + 1)
    ;[row] = await t.settled(txid, (r) => r[0].delivered === 1)
    expect(up.messages).toHaveLength(1)
  })

  it('defers when the connection drops during DATA, then delivers', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.dropDuringData = true
    const txid = await t.send(['a@example.com'])
    let [row] = await t.settled(txid, (r) => r[0].response !== null)
    expect(row.delivered).toBe(0)
    expect(await t.env.services.store.queue.pending()).toBe(1)
    t.sink.state.dropDuringData = false
    t.later(5 * MIN + 1)
    ;[row] = await t.settled(txid, (r) => r[0].delivered === 1)
    expect(t.sink.messages).toHaveLength(1)
  })

  it.each(['silent', 'lying'] as const)(
    'logs nothing delivered when the MX never answers the end of data (%s): deferred, retried, then delivered',
    async (mute) => {
      const mx = await startMuteMx()
      mx.state.mute = mute
      cleanup.push(() => mx.close())
      const t = await setup({ resolver: (p) => local(p), port: mx.port, env: { MAILROOM_DELIVERY_TIMEOUT: '2s' } })
      // A burst over few connections: each message's dot leaves with the next one's MAIL.
      const txids = await Promise.all(Array.from({ length: 6 }, (_, i) => t.send([`r${i}@example.com`])))
      for (const txid of txids) {
        const [row] = await t.settled(txid, (r) => r[0].response !== null)
        expect(row).toMatchObject({ delivered: 0, code: null, locked: 0 })
        expect(await waitingOf(t, txid)).toMatchObject([
          { state: 'deferred', attempts: 1, nextAttemptAt: t.env.clock() + 5 * MIN },
        ])
      }
      expect(mx.state.dots).toBeGreaterThanOrEqual(6)
      expect(mx.state.messages).toEqual([])
      mx.state.mute = false
      t.later(5 * MIN + 1)
      for (const txid of txids) expect((await t.settled(txid, (r) => r[0].delivered === 1))[0].code).toBe(250)
      expect(mx.state.messages.map((m) => m[0]).sort()).toEqual(
        Array.from({ length: 6 }, (_, i) => `r${i}@example.com`).sort(),
      )
    },
  )

  it('fails a recipient that is still deferred at the maximum age', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    t.sink.state.rcptRule = () => ({ code: 450, message: '4.2.1 Mailbox busy' })
    const txid = await t.send(['a@example.com'])
    await t.settled(txid, (r) => r[0].code === 450)
    for (const wait of [5, 10, 10, 10, 10, 10]) {
      t.later(wait * MIN + 1)
      await new Promise((r) => setTimeout(r, 100))
    }
    const [row] = await t.settled(txid, (r) => /gave up/.test(r[0].response ?? ''))
    expect(row.delivered).toBe(0)
    expect(await waitingOf(t, txid)).toEqual([])
  })

  it('uses MX hosts by preference, falling back to the next one', async () => {
    // Two sinks on one port at two loopback addresses: mx1 (preferred) and mx2.
    const second = await startSinkOn(0, '127.0.0.2')
    cleanup.push(() => second.close())
    const first = await startSinkOn(second.port, '127.0.0.1')
    cleanup.push(() => first.close())
    const zone = (a1: string) =>
      stubResolver({
        mx: {
          'example.com': [
            { exchange: 'mx2.example.com', priority: 20 },
            { exchange: 'mx1.example.com', priority: 10 },
          ],
        },
        a: { 'mx1.example.com': [a1], 'mx2.example.com': ['127.0.0.2'] },
      })
    const t = await setup({ resolver: () => zone('127.0.0.1'), port: second.port })
    const txid = await t.send(['a@example.com'])
    expect((await t.settled(txid, (r) => r[0].delivered === 1))[0].mxHostname).toBe('mx1.example.com')
    expect([first.messages.length, second.messages.length]).toEqual([1, 0])

    // mx1 at an address where nothing listens: mx2 takes the mail.
    const t2 = await setup({ resolver: () => zone('127.0.0.3'), port: second.port })
    const txid2 = await t2.send(['b@example.com'])
    expect((await t2.settled(txid2, (r) => r[0].delivered === 1))[0].mxHostname).toBe('mx2.example.com')
    expect(second.messages.map((m) => m.to)).toEqual([['b@example.com']])
  })

  it('delivers to the A record of a domain without MX (implicit MX)', async () => {
    const t = await setup({ resolver: () => stubResolver({ a: { 'implicit.test': ['127.0.0.1'] } }) })
    const txid = await t.send(['x@implicit.test'])
    expect((await t.settled(txid, (r) => r[0].delivered === 1))[0].mxHostname).toBe('implicit.test')
  })

  it('fails mail to a domain with a null MX without connecting', async () => {
    const t = await setup({ resolver: () => stubResolver({ mx: { 'null.test': [{ exchange: '', priority: 0 }] } }) })
    const txid = await t.send(['x@null.test'])
    const [row] = await t.settled(txid, (r) => r[0].code !== null)
    expect(row).toMatchObject({ delivered: 0, code: 556, response: expect.stringContaining('null MX') })
    expect(t.sink.state.connections).toBe(0)
  })

  it('does not connect to an MX at a loopback address unless MAILROOM_ALLOW_PRIVATE_MX=true, and says why', async () => {
    const t = await setup({ resolver: (p) => local(p), env: { MAILROOM_ALLOW_PRIVATE_MX: 'false' } })
    const txid = await t.send(['x@example.com'])
    const [row] = await t.settled(txid, (r) => r[0].code !== null)
    expect(row).toMatchObject({
      delivered: 0,
      code: 556,
      response: '5.4.4 mx.example.com resolves only to 127.0.0.1, a loopback address: not delivered',
      mxHostname: null,
    })
    expect(t.sink.state.connections).toBe(0)
    expect(t.sink.messages).toEqual([])
    expect(await waitingOf(t, txid)).toEqual([])
  })

  it('sends everything to the smarthost when one is set', async () => {
    const t = await setup({ resolver: () => stubResolver({}), env: {} })
    const smart = await createTestEnv({ MAILROOM_SMARTHOST: `127.0.0.1:${t.sink.port}` })
    cleanup.push(() => smart.close())
    const worker = new DeliveryWorker({ ...smart.services, resolver: stubResolver({}) })
    cleanup.push(() => worker.stop())
    await worker.start()
    const { txid } = await smart.services.relay.submit({
      order: {
        id: smart.orderId,
        accountId: smart.accountId,
        status: 'active',
        comment: null,
        senders: [],
        createdAt: 0,
      },
      envFrom: 's@example.org',
      recipients: ['r@unresolvable.test'],
      headerFrom: null,
      replyTo: null,
      subject: null,
      messageId: null,
      raw: [Buffer.from('Subject: x\r\n\r\nx\r\n')],
      origin: '127.0.0.1',
      transtype: 'HTTP',
      interface: 'api',
    })
    worker.kick()
    await expect
      .poll(
        async () =>
          (
            await smart.services.store.mail.log({
              orderId: smart.orderId,
              mailid: txid,
              skip: 0,
              limit: 1,
              dir: 'asc',
              groupby: 'recipient',
            })
          ).rows[0].delivered,
        { timeout: 10_000 },
      )
      .toBe(1)
    expect(t.sink.messages.map((m) => m.to)).toEqual([['r@unresolvable.test']])
  })

  it('starts a message it has room for at once: its rows are leased in the commit that queues it, with no claim', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    const txid = await t.send(['a@example.com', 'b@example.com'])
    await t.settled(txid, (r) => r.every((x) => x.delivered === 1))
    expect(t.claimed.filter((n) => n > 0)).toEqual([])
    expect(t.sink.messages.map((m) => m.to)).toEqual([['a@example.com', 'b@example.com']])
  })

  it('does not look at the queue after each delivery when nothing was left there', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    for (let i = 0; i < 20; i++) await t.settled(await t.send([`r${i}@example.com`]), (r) => r[0].delivered === 1)
    // One claim at start, then one per poll (a second): not one per delivery.
    expect(t.claimed.length).toBeLessThan(10)
    expect(t.claimed.filter((n) => n > 0)).toEqual([])
  })

  it('leaves what it has no room for in the queue, claims it later, and delivers everything once', async () => {
    // One delivery at a time: a claim leases at most 10 rows, and so the worker takes no more than that at acceptance.
    const t = await setup({ resolver: (p) => local(p), env: { MAILROOM_DELIVERY_CONCURRENCY: '1' } })
    const txids = await Promise.all(Array.from({ length: 30 }, (_, i) => t.send([`r${i}@example.com`])))
    for (const txid of txids) await t.settled(txid, (r) => r[0].delivered === 1)
    expect(t.claimed.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(20)
    expect(t.sink.messages.map((m) => m.to[0]).sort()).toEqual(
      Array.from({ length: 30 }, (_, i) => `r${i}@example.com`).sort(),
    )
  })

  it('sends a burst to one domain over one connection, each message once and in order, the next going out with the end of the one before', async () => {
    const t = await setup({ resolver: (p) => local(p), env: { MAILROOM_DOMAIN_CONCURRENCY: '1' } })
    const txids = await Promise.all(Array.from({ length: 20 }, (_, i) => t.send([`r${i}@example.com`])))
    for (const txid of txids) await t.settled(txid, (r) => r[0].delivered === 1)
    expect(t.sink.messages.map((m) => m.to[0])).toEqual(Array.from({ length: 20 }, (_, i) => `r${i}@example.com`))
    expect(t.sink.state.connections).toBe(1)
  })

  it('takes back the rows a dead process had leased', async () => {
    const t = await setup({ resolver: (p) => local(p) })
    await t.worker.stop()
    const txid = await t.send(['a@example.com'])
    // A previous process of this node leased the row and died.
    const leased = await t.env.services.store.queue.claim({
      node: t.env.config.nodeName,
      now: t.env.clock(),
      leaseMs: 60_000,
      limit: 10,
    })
    expect(leased).toHaveLength(1)
    const restarted = new DeliveryWorker({ ...t.env.services, resolver: local(t.sink.port) })
    cleanup.push(() => restarted.stop())
    await restarted.start()
    await t.settled(txid, (r) => r[0].delivered === 1)
    expect(t.sink.messages).toHaveLength(1)
  })

  it('records sandbox mail without a lookup or a connection, reports and suppressions as for real mail', async () => {
    let lookups = 0
    const log: Record<string, unknown>[] = []
    const t = await setup({
      resolver: (p) => {
        const real = local(p, ['example.com', 'example.org'])
        const counted = (f: (name: string) => Promise<unknown>) => (name: string) => (lookups++, f(name))
        return {
          resolveMx: counted(real.resolveMx),
          resolve4: counted(real.resolve4),
          resolve6: counted(real.resolve6),
        } as MxResolver
      },
      log,
    })
    const [bounce, defer] = [`bounce@${SANDBOX_DOMAIN}`, `defer@${SANDBOX_DOMAIN}`]
    const txid = await t.send([bounce, defer, 'here@example.com'], { sandbox: true })
    const first = await t.settled(txid, (r) => r.every((x) => x.code !== null))
    expect(first.map((r) => [r.recipient, r.delivered, r.code, r.mxHostname])).toEqual([
      [bounce, 0, 550, null],
      [defer, 0, 451, null],
      ['here@example.com', 1, 250, null],
    ])
    // The bounce is suppressed, and its sender gets a report, sandbox mail itself.
    expect(await t.env.services.store.blocks.suppressed(t.env.accountId, bounce)).toMatchObject({
      reason: expect.stringMatching(/^an earlier message to it bounced: 550 5\.1\.1/),
    })
    const reports = await t.env.services.store.mail.log({
      orderId: t.env.orderId,
      subject: 'Undelivered Mail Returned to Sender',
      skip: 0,
      limit: 10,
      dir: 'asc',
      groupby: 'recipient',
    })
    expect(reports.rows).toHaveLength(1)
    await t.settled(reports.rows[0].id, (r) => r[0].delivered === 1)
    // The deferred one is taken at its next attempt.
    t.later(5 * MIN)
    await t.settled(txid, (r) => r[1].delivered === 1)
    expect(lookups).toBe(0)
    expect(t.sink.state.connections).toBe(0)
    // One attempt each (the deferred one two), each logged as sandbox; the domains' groups run in any order.
    const attempts = log.filter((l) => l.msg === 'delivery attempt').map((l) => [l.rcpt, l.state, l.sandbox])
    expect(attempts.sort()).toEqual([
      [bounce, 'failed', true],
      [defer, 'deferred', true],
      [defer, 'delivered', true],
      ['here@example.com', 'delivered', true],
      ['sender@example.org', 'delivered', true],
    ])
    // Real mail from the same worker still goes out.
    const real = await t.send(['here@example.com'])
    await t.settled(real, (r) => r[0].delivered === 1)
    expect(t.sink.messages.map((m) => m.to)).toEqual([['here@example.com']])
  })

  describe('reports to senders (RFC 3464)', () => {
    /** The sender's domain resolves to the sink too, so that reports to it arrive there. */
    const both = (p: number) => local(p, ['example.com', 'example.org'])
    const unknownUser = (rcpt: string) =>
      rcpt === 'gone@example.com'
        ? { code: 550, message: '5.1.1 <gone@example.com>: Recipient address rejected: User unknown' }
        : undefined
    /** Every message of the order in the log, oldest first, one row each. */
    const messages = async (t: Awaited<ReturnType<typeof setup>>) =>
      (
        await t.env.services.store.mail.log({
          orderId: t.env.orderId,
          skip: 0,
          limit: 100,
          dir: 'asc',
          groupby: 'message',
        })
      ).rows
    /** The report the sink received, parsed, with its delivery-status part as fields. */
    const parseReport = async (raw: Buffer) => {
      const parsed = await simpleParser(raw, { keepDeliveryStatus: true })
      const part = (type: string) => parsed.attachments.find((a) => a.contentType === type)?.content.toString()
      const status = part('message/delivery-status') ?? ''
      const groups = status
        .trim()
        .replace(/\r\n(?=[ \t])/g, '')
        .split(/\r\n\r\n/)
        .map((group) => Object.fromEntries(group.split('\r\n').map((line) => line.split(/: (.*)/s).slice(0, 2))))
      return { parsed, groups, headers: part('text/rfc822-headers') }
    }

    it('sends the sender one report for an unknown user, from the null sender, in the same order’s log', async () => {
      const t = await setup({ resolver: both })
      t.sink.state.rcptRule = unknownUser
      const txid = await t.send(['gone@example.com', 'here@example.com'])
      await t.settled(txid, (r) => r.every((x) => x.code !== null))
      // The report was queued in the commit that recorded the failure: it is in the log already.
      const [original, report, ...more] = await messages(t)
      expect(more).toEqual([])
      expect(original.id).toBe(txid)
      expect(report).toMatchObject({
        from: '',
        to: 'sender@example.org',
        subject: 'Undelivered Mail Returned to Sender',
        transtype: 'DSN',
        orderId: t.env.orderId,
      })
      await t.settled(report.id, (r) => r[0].delivered === 1)
      expect(t.sink.messages.map((m) => [m.from, m.to])).toEqual([
        ['sender@example.org', ['here@example.com']],
        ['', ['sender@example.org']],
      ])
      // Both are in the order's statistics; only the sender's message is billed.
      const now = t.env.clock()
      expect(
        await t.env.services.store.mail.stats({
          orderIds: [t.env.orderId],
          since: null,
          cycleStart: now - 3_600_000,
          cycleEnd: now + 3_600_000,
          top: 10,
        }),
      ).toMatchObject({ usage: 1, received: 2 })
      const { parsed, groups, headers } = await parseReport(t.sink.messages[1].raw)
      expect(parsed.from?.value).toEqual([
        { name: 'Mail Delivery System', address: `MAILER-DAEMON@${t.env.config.nodeName}` },
      ])
      expect(parsed.headers.get('content-type')).toMatchObject({
        value: 'multipart/report',
        params: { 'report-type': 'delivery-status' },
      })
      expect(parsed.headers.get('auto-submitted')).toBe('auto-replied')
      expect(parsed.text).toContain('<gone@example.com>: 550 5.1.1 <gone@example.com>: Recipient address rejected')
      expect(groups).toEqual([
        {
          'Reporting-MTA': `dns; ${t.env.config.nodeName}`,
          'X-Mailroom-Transaction': txid,
          'Arrival-Date': expect.stringMatching(/ \+0000$/),
        },
        {
          'Final-Recipient': 'rfc822; gone@example.com',
          Action: 'failed',
          Status: '5.1.1',
          'Remote-MTA': 'dns; mx.example.com',
          'Diagnostic-Code': 'smtp; 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown',
          'Last-Attempt-Date': expect.stringMatching(/ \+0000$/),
        },
      ])
      expect(headers).toContain('Subject: delivery test\r\n')
      expect(headers).not.toContain('hello')
    })

    it("signs the report with DKIM when the node's domain is a sending domain of the account", async () => {
      const t = await setup({ resolver: both, env: { MAILROOM_NODE_NAME: 'mx.relay.test' } })
      const key = await t.env.services.store.domains.addKey({
        accountId: t.env.accountId,
        domain: 'relay.test',
        selector: 'r1',
        algorithm: 'rsa',
        ...generateDkimKey('rsa'),
        now: t.env.clock(),
      })
      const [record] = dnsRecords(key, 'mx.relay.test')
      t.sink.state.rcptRule = unknownUser
      const txid = await t.send(['gone@example.com'])
      await t.settled(txid, (r) => r.every((x) => x.code !== null))
      const report = (await messages(t))[1]
      await t.settled(report.id, (r) => r[0].delivered === 1)
      const raw = t.sink.messages.find((m) => m.from === '')!.raw
      const { results } = await dkimVerify(raw, { resolver: resolverOf([record]) })
      expect(results.map((r) => `${r.signingDomain}/${r.selector}: ${r.status.result}`)).toEqual([
        'relay.test/r1: pass',
      ])
    })

    it('reports a null MX as failed, with its 5.1.10 and no remote MTA', async () => {
      const t = await setup({
        resolver: () =>
          stubResolver({
            mx: {
              'null.test': [{ exchange: '', priority: 0 }],
              'example.org': [{ exchange: 'mx.example.org', priority: 10 }],
            },
            a: { 'mx.example.org': ['127.0.0.1'] },
          }),
      })
      const txid = await t.send(['x@null.test'])
      await t.settled(txid, (r) => r[0].code === 556)
      await expect.poll(() => t.sink.messages.length, { timeout: 10_000 }).toBe(1)
      const { groups } = await parseReport(t.sink.messages[0].raw)
      expect(groups[1]).toEqual({
        'Final-Recipient': 'rfc822; x@null.test',
        Action: 'failed',
        Status: '5.1.10',
        'Diagnostic-Code': 'smtp; 556 5.1.10 null.test does not accept mail (null MX)',
        'Last-Attempt-Date': expect.any(String),
      })
    })

    it('sends no report about a report that fails: it is only logged', async () => {
      const log: Record<string, unknown>[] = []
      const t = await setup({ resolver: both, log })
      // The sender's own mailbox is gone too: the report to it is refused.
      t.sink.state.rcptRule = (rcpt) =>
        rcpt === 'sender@example.org' ? { code: 550, message: '5.1.1 No such user' } : unknownUser(rcpt)
      const txid = await t.send(['gone@example.com'])
      await t.settled(txid, (r) => r[0].code === 550)
      const [, report] = await messages(t)
      await t.settled(report.id, (r) => r[0].code === 550)
      expect((await messages(t)).map((m) => [m.from, m.to, m.delivered])).toEqual([
        ['sender@example.org', 'gone@example.com', 0],
        ['', 'sender@example.org', 0],
      ])
      expect(await t.env.services.store.queue.pending()).toBe(0)
      expect(t.sink.messages).toEqual([])
      expect(log.filter((l) => /null sender/.test(String(l.msg)))).toEqual([
        expect.objectContaining({ txid: report.id, rcpts: ['sender@example.org'] }),
      ])
    })

    it('sends no report for a message from the null sender', async () => {
      const log: Record<string, unknown>[] = []
      const t = await setup({ resolver: both, log })
      t.sink.state.rcptRule = unknownUser
      const txid = await t.send(['gone@example.com'], { envFrom: '' })
      await t.settled(txid, (r) => r[0].code === 550)
      expect((await messages(t)).map((m) => m.id)).toEqual([txid])
      expect(await t.env.services.store.queue.pending()).toBe(0)
      expect(log.filter((l) => /null sender/.test(String(l.msg)))).toHaveLength(1)
    })

    it('sends none with MAILROOM_BOUNCE_REPORTS=off', async () => {
      const t = await setup({ resolver: both, env: { MAILROOM_BOUNCE_REPORTS: 'off' } })
      t.sink.state.rcptRule = unknownUser
      const txid = await t.send(['gone@example.com'])
      await t.settled(txid, (r) => r[0].code === 550)
      expect((await messages(t)).map((m) => m.id)).toEqual([txid])
      expect(await t.env.services.store.queue.pending()).toBe(0)
      expect(t.sink.messages).toEqual([])
    })

    it('warns once of a recipient deferred past MAILROOM_DELAY_WARNING, then reports it failed at the maximum age', async () => {
      const t = await setup({ resolver: both, env: { MAILROOM_DELAY_WARNING: '10m' } })
      t.sink.state.rcptRule = (rcpt) =>
        rcpt === 'busy@example.com' ? { code: 450, message: '4.2.1 Mailbox busy' } : undefined
      const txid = await t.send(['busy@example.com'])
      /** Moves past the next retry and waits until that attempt is recorded. */
      const attempt = async (n: number, wait: number) => {
        t.later(wait * MIN + 1)
        await expect.poll(async () => (await waitingOf(t, txid))[0]?.attempts ?? 'final', { timeout: 10_000 }).toBe(n)
      }
      await expect.poll(async () => (await t.rows(txid))[0].code, { timeout: 10_000 }).toBe(450)
      await attempt(2, 5) // 5 minutes after acceptance: not yet
      expect((await messages(t)).length).toBe(1)
      await attempt(3, 10) // 15 minutes: the warning
      const [, warning] = await messages(t)
      expect(warning).toMatchObject({
        from: '',
        to: 'sender@example.org',
        subject: 'Delayed Mail (still being retried)',
      })
      await attempt(4, 10) // 25 minutes: not again
      await attempt(5, 10)
      await attempt(6, 10)
      expect((await messages(t)).length).toBe(2)
      await t.settled(warning.id, (r) => r[0].delivered === 1)
      const delayed = await parseReport(t.sink.messages[0].raw)
      expect(delayed.groups[1]).toMatchObject({
        'Final-Recipient': 'rfc822; busy@example.com',
        Action: 'delayed',
        Status: '4.2.1',
        'Diagnostic-Code': 'smtp; 450 4.2.1 Mailbox busy',
        // Accepted at the test clock's start; MAILROOM_MAX_QUEUE_AGE is 1h.
        'Will-Retry-Until': 'Sun, 22 Nov 2026 13:00:00 +0000',
      })
      expect(delayed.parsed.text).toContain('It is still being tried, until Sun, 22 Nov 2026 13:00:00 +0000')
      // Past the maximum age the recipient fails, and the sender is told so.
      t.later(10 * MIN + 1)
      await t.settled(txid, (r) => /gave up/.test(r[0].response ?? ''))
      const all = await messages(t)
      expect(all.map((m) => m.subject)).toEqual([
        'delivery test',
        'Delayed Mail (still being retried)',
        'Undelivered Mail Returned to Sender',
      ])
      await t.settled(all[2].id, (r) => r[0].delivered === 1)
      const failed = await parseReport(t.sink.messages[1].raw)
      expect(failed.groups[1]).toMatchObject({ Action: 'failed', Status: '4.2.1' })
      expect(failed.groups[1]['Diagnostic-Code']).toMatch(
        /^smtp; 450 4\.2\.1 Mailbox busy \(gave up after \d+ attempts\)$/,
      )
    })
  })
})

async function startSinkOn(port: number, host = '127.0.0.1') {
  const { SMTPServer } = await import('smtp-server')
  const messages: { to: string[] }[] = []
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    hideSTARTTLS: true,
    logger: false,
    // Our client keeps connections open for reuse: do not wait for them on close.
    closeTimeout: 100,
    onData(stream, session, cb) {
      stream.resume()
      stream.on('end', () => {
        messages.push({ to: session.envelope.rcptTo.map((a) => a.address) })
        cb(null, 'Ok')
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(port, host, () => resolve()))
  return {
    port: (server.server.address() as import('node:net').AddressInfo).port,
    messages,
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}
