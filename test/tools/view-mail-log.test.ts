import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { rawMail } from '../../tools/raw-mail.js'
import { sendMail } from '../../tools/send-mail.js'
import { toEpochSeconds, viewMailLog } from '../../tools/view-mail-log.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { MailLog, MailLogEntry } from '../../tools/schemas.js'
import { addOrder, expectRefused, expectSchemaRefusal, logRows, run, setDelivery } from './support.js'

const T_A = Date.UTC(2026, 10, 20, 10, 0, 0)
const T_B = Date.UTC(2026, 10, 21, 15, 0, 0)
const T_C = Date.UTC(2026, 10, 22, 11, 30, 0)
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0)
const sec = (ms: number) => ms / 1000

/**
 * Three messages, four recipient rows (oldest first):
 *   A:bob, A:carol (2026-11-20 10:00, 192.0.2.10, alice, Reply-To billing, <AbC-1@Example.COM>, carol delivered via mx.example.net)
 *   B:bob          (2026-11-21 15:00, 2001:db8::1, dave, <zz-2@other.net>, delivered via mx.example.com)
 *   C:erin         (2026-11-22 11:30, 192.0.2.10, alice, <q3@example.com>, queued)
 */
const MESSAGES = {
  A: {
    time: T_A,
    origin: '192.0.2.10',
    raw: 'From: Alice <alice@example.org>\r\nTo: bob@example.com, carol@example.net\r\nReply-To: billing@example.org\r\nSubject: Invoice 1\r\nMessage-ID: <AbC-1@Example.COM>\r\n\r\nA\r\n',
  },
  B: {
    time: T_B,
    origin: '2001:db8::1',
    raw: 'From: dave@example.org\r\nTo: bob@example.com\r\nSubject: Hello\r\nMessage-ID: <zz-2@other.net>\r\n\r\nB\r\n',
  },
  C: {
    time: T_C,
    origin: '192.0.2.10',
    raw: 'From: alice@example.org\r\nTo: erin@example.com\r\nSubject: Invoice 1\r\nMessage-ID: <q3@example.com>\r\n\r\nC\r\n',
  },
} as const
type Label = keyof typeof MESSAGES

describe('viewMailLog', () => {
  let env: TestEnv
  let txids: Record<Label, string>
  beforeEach(async () => {
    env = await createTestEnv()
    txids = {} as Record<Label, string>
    for (const [label, m] of Object.entries(MESSAGES) as [Label, (typeof MESSAGES)[Label]][]) {
      env.clock.set(m.time)
      txids[label] = (await run(rawMail, { raw_email: m.raw }, { ...env.ctx, origin: m.origin })).text
    }
    setDelivery(env, txids.A, 'carol@example.net', { delivered: 1, mx: 'mx.example.net' })
    setDelivery(env, txids.B, 'bob@example.com', {
      delivered: 1,
      mx: 'mx.example.com',
      code: 250,
      response: '250 2.0.0 queued as 123',
    })
    setDelivery(env, txids.A, 'bob@example.com', {
      delivered: 0,
      mx: 'mx.example.com',
      code: 451,
      response: '451 4.7.1 try later',
    })
    env.clock.set(NOW)
  })
  afterEach(() => env.close())

  const view = (input: Record<string, unknown> = {}, ctx = env.ctx) => run(viewMailLog, input, ctx)
  /** The rows as `label:recipient`, in the order returned. */
  const keys = async (input: Record<string, unknown> = {}) => {
    const byTxid = Object.fromEntries(Object.entries(txids).map(([l, t]) => [t, l]))
    const result = await view({ dir: 'asc', ...input })
    return result.emails.map((e) => `${byTxid[e.id]}:${e.to}`)
  }

  it('lists every recipient row, newest first, with the delivery fields', async () => {
    const result = await view()
    expect(viewMailLog.output.parse(result)).toEqual(result)
    expect(result).toMatchObject({ total: 4, skip: 0, limit: 100 })
    expect(result.emails.map((e) => [e.id, e.to, e.seq])).toEqual([
      [txids.C, 'erin@example.com', 1],
      [txids.B, 'bob@example.com', 1],
      [txids.A, 'carol@example.net', 2],
      [txids.A, 'bob@example.com', 1],
    ])
    expect(result.emails.map((e) => e._id)).toEqual([...result.emails.map((e) => e._id)].sort((a, b) => b - a))
    expect(result.emails[1]).toMatchObject({
      delivered: 1,
      code: 250,
      response: '250 2.0.0 queued as 123',
      mxHostname: 'mx.example.com',
      origin: '2001:db8::1',
      created: '2026-11-21 15:00:00',
      time: sec(T_B),
    })
    expect(result.emails[0]).toMatchObject({
      delivered: 0,
      code: null,
      mxHostname: null,
      subject: 'Invoice 1',
      messageId: '<q3@example.com>',
    })
  })

  it("writes the store's epoch times in the contract's formats, its fields in the contract's order", async () => {
    const at = NOW + 789
    env.clock.set(at)
    const { text } = await run(rawMail, { raw_email: MESSAGES.C.raw }, env.ctx)
    await env.services.store.queue.claim({ node: 'node-a', now: at + 1234, leaseMs: 60_000, limit: 10 })
    const [row] = (await logRows(env, { mailid: text })).rows
    expect(row).toMatchObject({ createdAt: at, time: sec(NOW), orderId: env.orderId, lockTime: at + 1234, queued: at })
    const [entry] = (await view({ mailid: text })).emails
    // `sandbox` is there only for sandbox mail: real mail's entry is the contract's.
    expect(Object.keys(entry)).toEqual(Object.keys(MailLogEntry.shape).filter((k) => k !== 'sandbox'))
    expect(entry).toMatchObject({
      created: '2026-11-22 12:00:00',
      time: sec(NOW),
      user: `mb${env.orderId}`,
      locked: 1,
      lockTime: String(at + 1234),
      assigned: 'node-a',
      queued: '2026-11-22T12:00:00.789Z',
    })
  })

  it('marks sandbox mail `sandbox: true`, and real mail not at all', async () => {
    const send = async (ctx: typeof env.ctx, to: string) =>
      (await run(sendMail, { from: 'me@example.org', to, subject: 'which', body: 'b' }, ctx)).text
    const sandbox = await send({ ...env.ctx, sandbox: true }, 'rehearsal@example.com')
    const real = await send(env.ctx, 'real@example.com')
    for (const groupby of ['recipient', 'message']) {
      const { emails } = await view({ groupby, subject: 'which' })
      expect(emails.map((e) => [e.id, e.sandbox])).toEqual([
        [real, undefined],
        [sandbox, true],
      ])
      expect('sandbox' in emails[0]).toBe(false)
      expect(MailLog.parse({ total: 2, skip: 0, limit: 100, emails })).toMatchObject({ emails })
    }
  })

  it('orders oldest first with dir=asc', async () => {
    expect(await keys({ dir: 'asc' })).toEqual([
      'A:bob@example.com',
      'A:carol@example.net',
      'B:bob@example.com',
      'C:erin@example.com',
    ])
  })

  describe('filters', () => {
    it.each<[string, Record<string, unknown>, string[]]>([
      ['origin (IPv4)', { origin: '192.0.2.10' }, ['A:bob@example.com', 'A:carol@example.net', 'C:erin@example.com']],
      ['origin (IPv6)', { origin: '2001:db8::1' }, ['B:bob@example.com']],
      ['origin without messages', { origin: '198.51.100.1' }, []],
      ['mx', { mx: 'mx.example.net' }, ['A:carol@example.net']],
      ['mx shared by two messages', { mx: 'mx.example.com' }, ['A:bob@example.com', 'B:bob@example.com']],
      ['from', { from: 'alice@example.org' }, ['A:bob@example.com', 'A:carol@example.net', 'C:erin@example.com']],
      ['to', { to: 'bob@example.com' }, ['A:bob@example.com', 'B:bob@example.com']],
      ['subject (exact)', { subject: 'Invoice 1' }, ['A:bob@example.com', 'A:carol@example.net', 'C:erin@example.com']],
      ['subject in another case (exact match only)', { subject: 'invoice 1' }, []],
      ['subject prefix (exact match only)', { subject: 'Invoice' }, []],
      ['messageId substring, any case', { messageId: 'abc-1' }, ['A:bob@example.com', 'A:carol@example.net']],
      [
        'messageId upper-case substring',
        { messageId: 'EXAMPLE.COM' },
        ['A:bob@example.com', 'A:carol@example.net', 'C:erin@example.com'],
      ],
      ['messageId whole value', { messageId: '<zz-2@other.net>' }, ['B:bob@example.com']],
      ['messageId of two characters', { messageId: 'ZZ' }, ['B:bob@example.com']],
      [
        'messageId of two characters across a separator',
        { messageId: 'c-' },
        ['A:bob@example.com', 'A:carol@example.net'],
      ],
      ['messageId of one character', { messageId: 'Q' }, ['C:erin@example.com']],
      ['messageId not contained', { messageId: 'nothing-like-it' }, []],
      ['replyto', { replyto: 'billing@example.org' }, ['A:bob@example.com', 'A:carol@example.net']],
      ['headerfrom', { headerfrom: 'dave@example.org' }, ['B:bob@example.com']],
      ['delivered=1', { delivered: 1 }, ['A:carol@example.net', 'B:bob@example.com']],
      ['delivered=0', { delivered: 0 }, ['A:bob@example.com', 'C:erin@example.com']],
      ['startDate as epoch seconds (inclusive)', { startDate: sec(T_B) }, ['B:bob@example.com', 'C:erin@example.com']],
      [
        'endDate as epoch seconds (inclusive)',
        { endDate: sec(T_B) },
        ['A:bob@example.com', 'A:carol@example.net', 'B:bob@example.com'],
      ],
      ['startDate one second after a message', { startDate: sec(T_B) + 1 }, ['C:erin@example.com']],
      ['endDate one second before a message', { endDate: sec(T_B) - 1 }, ['A:bob@example.com', 'A:carol@example.net']],
      ['startDate as a date', { startDate: '2026-11-21' }, ['B:bob@example.com', 'C:erin@example.com']],
      [
        'endDate as a date (includes that whole day)',
        { endDate: '2026-11-21' },
        ['A:bob@example.com', 'A:carol@example.net', 'B:bob@example.com'],
      ],
      ['startDate and endDate of one day', { startDate: '2026-11-21', endDate: '2026-11-21' }, ['B:bob@example.com']],
      ['startDate yesterday', { startDate: 'yesterday' }, ['B:bob@example.com', 'C:erin@example.com']],
      [
        'endDate yesterday',
        { endDate: 'yesterday' },
        ['A:bob@example.com', 'A:carol@example.net', 'B:bob@example.com'],
      ],
      ['startDate today', { startDate: 'today' }, ['C:erin@example.com']],
      ['startDate with a time of day', { startDate: '2026-11-21 15:00' }, ['B:bob@example.com', 'C:erin@example.com']],
      ['mailid', { mailid: '%A' }, ['A:bob@example.com', 'A:carol@example.net']],
      ['mailid in upper case', { mailid: '%A!' }, ['A:bob@example.com', 'A:carol@example.net']],
      ['from and to together', { from: 'alice@example.org', to: 'erin@example.com' }, ['C:erin@example.com']],
      ['to and delivered together', { to: 'bob@example.com', delivered: 1 }, ['B:bob@example.com']],
    ])('filters by %s', async (_label, input, expected) => {
      // %A stands for message A's transaction id (%A! upper-cased): it is only known at run time.
      const resolved = { ...input }
      if (resolved.mailid === '%A') resolved.mailid = txids.A
      if (resolved.mailid === '%A!') resolved.mailid = txids.A.toUpperCase()
      expect(await keys(resolved)).toEqual(expected)
      expect((await view(resolved)).total).toBe(expected.length)
    })

    it('finds every message of a window after the clock was stepped back: a time never goes back', async () => {
      // D is accepted at 11:40, then the clock is stepped back 5 minutes and E is accepted: both
      // within the window from 11:30, which was read as the ids from E (its earliest time) to D
      // (its latest), none at all, when E's time was stored as the clock gave it.
      const accept = async (time: number, raw: string) => {
        env.clock.set(time)
        return (await run(rawMail, { raw_email: raw }, env.ctx)).text
      }
      const d = await accept(T_C + 600_000, 'From: alice@example.org\r\nTo: dan@example.com\r\nSubject: D\r\n\r\nD\r\n')
      const e = await accept(T_C + 300_000, 'From: alice@example.org\r\nTo: eve@example.com\r\nSubject: E\r\n\r\nE\r\n')
      env.clock.set(NOW)
      // E is recorded at D's time, not before it: ids and times go up together.
      const log = await view({ startDate: sec(T_C) + 1, dir: 'asc' })
      expect(log.emails.map((r) => [r.id, r.time, r.created])).toEqual([
        [d, sec(T_C) + 600, '2026-11-22 11:40:00'],
        [e, sec(T_C) + 600, '2026-11-22 11:40:00'],
      ])
      expect(log.total).toBe(2)
      expect((await view({ startDate: sec(T_C) + 1, from: 'alice@example.org' })).total).toBe(2)
    })

    it('reads natural-language dates relative to the clock', async () => {
      env.clock.set(Date.UTC(2026, 10, 23, 9, 0, 0))
      expect(await keys({ startDate: 'yesterday' })).toEqual(['C:erin@example.com'])
      expect(await keys({ startDate: 'yesterday', endDate: 'yesterday' })).toEqual(['C:erin@example.com'])
      expect(await keys({ endDate: '2 days ago' })).toEqual([
        'A:bob@example.com',
        'A:carol@example.net',
        'B:bob@example.com',
      ])
    })
  })

  describe('grouping', () => {
    it('gives one row per message with groupby=message, to = every recipient, total = messages', async () => {
      const result = await view({ groupby: 'message', dir: 'asc' })
      expect(result.total).toBe(3)
      expect(result.emails.map((e) => [e.id, e.to, e.seq])).toEqual([
        [txids.A, 'bob@example.com,carol@example.net', 1],
        [txids.B, 'bob@example.com', 1],
        [txids.C, 'erin@example.com', 1],
      ])
    })

    it.each<[string, Record<string, unknown>, Label[]]>([
      ['to a second recipient', { to: 'carol@example.net' }, ['A']],
      ['delivered=1', { delivered: 1 }, ['A', 'B']],
      ['mx', { mx: 'mx.example.com' }, ['A', 'B']],
      ['from', { from: 'alice@example.org' }, ['A', 'C']],
      ['from and delivered together', { from: 'alice@example.org', delivered: 1 }, ['A']],
    ])('counts messages, not recipients, when filtering %s with groupby=message', async (_label, input, expected) => {
      const result = await view({ ...input, groupby: 'message', dir: 'asc' })
      expect(result.emails.map((e) => e.id)).toEqual(expected.map((l) => txids[l]))
      expect(result.total).toBe(expected.length)
      // Each row is its message's first recipient's, whichever recipient matched.
      expect(result.emails.map((e) => e.seq)).toEqual(expected.map(() => 1))
      expect((await view({ ...input, groupby: 'message', dir: 'desc' })).emails.map((e) => e.id)).toEqual(
        expected.map((l) => txids[l]).reverse(),
      )
    })

    it('counts recipient rows with the default groupby=recipient', async () => {
      expect((await view({ from: 'alice@example.org' })).total).toBe(3)
      expect((await view({ from: 'alice@example.org', groupby: 'recipient' })).total).toBe(3)
    })
  })

  describe('paging', () => {
    it.each<[{ skip?: number; limit?: number; dir?: string; groupby?: string }, string[]]>([
      [{ limit: 2 }, ['C:erin@example.com', 'B:bob@example.com']],
      [{ skip: 2, limit: 2 }, ['A:carol@example.net', 'A:bob@example.com']],
      [{ skip: 3, limit: 2 }, ['A:bob@example.com']],
      [{ skip: 10 }, []],
      [{ skip: 1, limit: 1, dir: 'asc' }, ['A:carol@example.net']],
      [{ limit: 1, groupby: 'message' }, ['C:erin@example.com']],
    ])('pages with %o and echoes skip and limit; total counts every match', async (input, expected) => {
      const byTxid = Object.fromEntries(Object.entries(txids).map(([l, t]) => [t, l]))
      const result = await view(input)
      expect(result.emails.map((e) => `${byTxid[e.id]}:${e.to}`)).toEqual(expected)
      expect(result).toMatchObject({
        skip: input.skip ?? 0,
        limit: input.limit ?? 100,
        total: input.groupby === 'message' ? 3 : 4,
      })
    })
  })

  describe('which mail order', () => {
    it('reads the first active order by default and an explicit order when given', async () => {
      const { order } = await addOrder(env)
      const { text } = await run(rawMail, { raw_email: MESSAGES.B.raw, id: order.id }, env.ctx)
      expect((await view()).total).toBe(4)
      const other = await view({ id: order.id })
      expect(other.emails.map((e) => [e.id, e.user])).toEqual([[text, `mb${order.id}`]])
    })

    it("still shows a canceled order's history when asked by id", async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      expect((await view({ id: env.orderId })).total).toBe(4)
    })

    it('refuses without an active order when no id is given (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(view(), 404, 'no active mail order')
    })

    it("refuses another account's order like a missing one (404) and shows none of its rows", async () => {
      const other = await env.newAccount()
      await expectRefused(view({ id: other.orderId }), 404, `id: mail order ${other.orderId} not found`)
      await expectRefused(view({ id: env.orderId }, other.ctx), 404, `id: mail order ${env.orderId} not found`)
      expect((await view({}, other.ctx)).total).toBe(0)
    })
  })

  describe('refusals', () => {
    it.each<[string, Record<string, unknown>]>([
      ['limit', { limit: 0 }],
      ['limit', { limit: 10001 }],
      ['limit', { limit: 2.5 }],
      ['skip', { skip: -1 }],
      ['skip', { skip: 2_147_483_648 }],
      ['mailid', { mailid: 'a'.repeat(17) }],
      ['mailid', { mailid: 'a'.repeat(20) }],
      ['origin', { origin: 'mail.example.com' }],
      ['origin', { origin: '192.0.2.300' }],
      ['from', { from: 'alice' }],
      ['to', { to: 'bob@' }],
      ['replyto', { replyto: 'x' }],
      ['headerfrom', { headerfrom: 'x' }],
      ['delivered', { delivered: 2 }],
      ['delivered', { delivered: '1' }],
      ['dir', { dir: 'up' }],
      ['groupby', { groupby: 'day' }],
      ['sort', { sort: 'subject' }],
      ['startDate', { startDate: -1 }],
      ['endDate', { endDate: 10_000_000_000 }],
      ['startDate', { startDate: '' }],
      ['id', { id: 0 }],
    ])('refuses a bad %s in the schema', (path, input) => {
      expectSchemaRefusal(viewMailLog, input, path)
    })

    it('accepts the limits of its ranges', async () => {
      expect((await view({ limit: 1 })).emails).toHaveLength(1)
      expect((await view({ limit: 10000 })).emails).toHaveLength(4)
      expect((await view({ startDate: 0, endDate: 9_999_999_999 })).total).toBe(4)
    })

    it.each([
      ['startDate', 'garbage'],
      ['startDate', 'not a date at all'],
      ['endDate', '2026-02-30'],
      ['endDate', 'later'],
    ])('refuses an unparseable %s %j (400 naming the field)', async (field, value) => {
      await expectRefused(view({ [field]: value }), 400, new RegExp(`^${field}: "${value}" is not a date`))
    })

    it('refuses an unparseable date before looking for an order (400, not 404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(view({ startDate: 'someday maybe' }), 400, /^startDate: /)
    })

    it('refuses a date followed by text it did not understand (400)', async () => {
      await expectRefused(view({ endDate: '2026-11-21 garbage' }), 400, /^endDate: /)
    })
  })
})

describe('toEpochSeconds', () => {
  const now = Date.UTC(2026, 10, 22, 12, 0, 0)
  it.each<[number | string, 'start' | 'end', string]>([
    [1_795_219_200, 'start', '2026-11-21T00:00:00Z'],
    [1_795_219_200, 'end', '2026-11-21T00:00:00Z'],
    ['2026-11-21', 'start', '2026-11-21T00:00:00Z'],
    ['2026-11-21', 'end', '2026-11-21T23:59:59Z'],
    ['yesterday', 'start', '2026-11-21T00:00:00Z'],
    ['yesterday', 'end', '2026-11-21T23:59:59Z'],
    ['today', 'start', '2026-11-22T00:00:00Z'],
    ['last monday', 'start', '2026-11-16T00:00:00Z'],
    ['2026-11-21 10:00', 'end', '2026-11-21T10:00:00Z'],
    ['2026-11-21T10:00:00+02:00', 'start', '2026-11-21T08:00:00Z'],
    ['Nov 21 2026', 'start', '2026-11-21T00:00:00Z'],
  ])('reads %j as the %s edge %s', (value, edge, iso) => {
    expect(toEpochSeconds('startDate', value, edge, now)).toBe(Date.parse(iso) / 1000)
  })
})
