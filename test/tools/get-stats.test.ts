import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { billingCycle, cost, getStats, windowStart } from '../../tools/get-stats.js'
import { sendAdvMail } from '../../tools/send-adv-mail.js'
import { STATS_WINDOWS } from '../../tools/schemas.js'
import type { ToolContext } from '../../tools/define.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectSchemaRefusal, run, setDelivery } from './support.js'

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0)
const at = (iso: string) => Date.parse(iso)

describe('getStats', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  /** Sends one message at `time` (the clock is put back to NOW afterwards). */
  const sendAt = async (
    time: number,
    input: { from?: string; to?: string; origin?: string; id?: number } = {},
    ctx: ToolContext = env.ctx,
  ) => {
    env.clock.set(time)
    try {
      const { origin = ctx.origin, ...rest } = input
      return (
        await run(
          sendAdvMail,
          { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'b', ...rest },
          { ...ctx, origin },
        )
      ).text
    } finally {
      env.clock.set(NOW)
    }
  }
  const stats = (time?: string, ctx: ToolContext = env.ctx) => run(getStats, time === undefined ? {} : { time }, ctx)

  it('reports zeros and the base price for an account that sent nothing', async () => {
    const result = await stats()
    expect(result).toEqual({
      time: '1h',
      usage: 0,
      currency: 'USD',
      cost: 1,
      received: 0,
      sent: 0,
      volume: { to: {}, from: {}, ip: {} },
    })
    expect(getStats.output.parse(result)).toEqual(result)
  })

  describe('windows', () => {
    // An account whose billing cycle starts on the 5th: Nov 5 00:00 to Dec 5 00:00 (UTC).
    let ctx: ToolContext
    beforeEach(async () => {
      env.clock.set(at('2026-11-05T09:00:00Z'))
      ctx = (await env.newAccount()).ctx
      env.clock.set(NOW)
      for (const iso of [
        '2026-10-20T10:00:00Z', // previous month and cycle
        '2026-11-03T10:00:00Z', // this month, previous cycle
        '2026-11-10T10:00:00Z', // this cycle, more than 7 days ago
        '2026-11-16T10:00:00Z', // last 7 days
        '2026-11-21T20:00:00Z', // last 24 hours, not today
        '2026-11-22T08:00:00Z', // today, more than an hour ago
        '2026-11-22T11:30:00Z', // last hour
      ]) {
        await sendAt(at(iso), {}, ctx)
      }
    })

    it.each([
      ['1h', 1],
      ['24h', 3],
      ['day', 2],
      ['7d', 4],
      ['billing', 5],
      ['month', 6],
      ['all', 7],
    ] as const)('counts the messages received in the %s window', async (time, received) => {
      const result = await stats(time, ctx)
      expect(result).toMatchObject({ time, received, usage: 5, cost: 1.01 })
      expect(result.volume.from).toEqual({ 'me@example.org': received })
    })

    it('uses 1h when no time is given', async () => {
      expect(await stats(undefined, ctx)).toMatchObject({ time: '1h', received: 1 })
    })

    it('moves with the clock', async () => {
      env.clock.set(at('2026-12-05T00:00:00Z')) // a new cycle begins
      expect(await stats('billing', ctx)).toMatchObject({ received: 0, usage: 0, cost: 1 })
      expect(await stats('month', ctx)).toMatchObject({ received: 0 })
      expect(await stats('all', ctx)).toMatchObject({ received: 7 })
    })
  })

  it.each([
    ['exactly at the window start', '2026-11-22T11:00:00Z', 1],
    ['one second before the window start', '2026-11-22T10:59:59Z', 0],
  ])('includes a message %s of the 1h window', async (_label, iso, received) => {
    await sendAt(at(iso))
    expect(await stats('1h')).toMatchObject({ received })
  })

  it('counts sent as successful recipient deliveries of messages in the window', async () => {
    const old = await sendAt(at('2026-11-20T11:20:00Z'), { to: 'erin@example.com' })
    const a = await sendAt(at('2026-11-22T11:10:00Z'), { to: 'bob@example.com, carol@example.net' })
    const b = await sendAt(at('2026-11-22T11:20:00Z'), { to: 'dave@example.com' })
    setDelivery(env, a, 'bob@example.com', { delivered: 1, mx: 'mx.example.com' })
    setDelivery(env, a, 'carol@example.net', { delivered: 1, mx: 'mx.example.net' })
    setDelivery(env, b, 'dave@example.com', {
      delivered: 0,
      mx: 'mx.example.com',
      code: 550,
      response: '550 5.1.1 user unknown',
    })
    setDelivery(env, old, 'erin@example.com', { delivered: 1, mx: 'mx.example.com' })
    expect(await stats('1h')).toMatchObject({ received: 2, sent: 2 })
    expect(await stats('all')).toMatchObject({ received: 3, sent: 3 })
  })

  it('breaks the volume down by recipient, envelope sender and client IP, largest first', async () => {
    const t = at('2026-11-22T11:30:00Z')
    await sendAt(at('2026-11-21T11:30:00Z'), { from: 'old@example.org', to: 'old@example.com', origin: '198.51.100.1' })
    await sendAt(t, { from: 'alice@example.org', to: 'bob@example.com', origin: '192.0.2.1' })
    await sendAt(t, { from: 'alice@example.org', to: 'bob@example.com, carol@example.net', origin: '192.0.2.1' })
    await sendAt(t, { from: 'dave@example.org', to: 'carol@example.net, bob@example.com', origin: '2001:db8::5' })
    const { volume } = await stats('1h')
    expect(volume).toEqual({
      to: { 'bob@example.com': 3, 'carol@example.net': 2 },
      from: { 'alice@example.org': 2, 'dave@example.org': 1 },
      ip: { '192.0.2.1': 2, '2001:db8::5': 1 },
    })
    expect(Object.keys(volume.to)).toEqual(['bob@example.com', 'carol@example.net'])
    expect((await stats('all')).volume.ip).toEqual({ '192.0.2.1': 2, '2001:db8::5': 1, '198.51.100.1': 1 })
  })

  it("covers all active orders of the account, not canceled ones nor other accounts'", async () => {
    const { order: second } = await addOrder(env)
    const { order: third } = await addOrder(env)
    const other = await env.newAccount()
    const t = at('2026-11-22T11:30:00Z')
    await sendAt(t)
    await sendAt(t, { id: second.id })
    await sendAt(t, { id: third.id })
    await sendAt(t, {}, other.ctx)
    expect(await stats('1h')).toMatchObject({ received: 3, usage: 3 })
    await env.services.store.orders.setStatus(third.id, 'canceled')
    expect(await stats('1h')).toMatchObject({ received: 2, usage: 2 })
    expect(await stats('1h', other.ctx)).toMatchObject({ received: 1, usage: 1 })
  })

  it('bills usage in the current cycle whatever the window: 55 messages cost 1.02', async () => {
    // The account was made on Nov 22 at noon: its cycle runs from Nov 22 00:00.
    await sendAt(at('2026-11-21T23:59:59Z')) // previous cycle
    for (let i = 0; i < 55; i++) await sendAt(at('2026-11-22T01:00:00Z') + i * 1000)
    for (const time of STATS_WINDOWS) {
      expect(await stats(time)).toMatchObject({ time, usage: 55, cost: 1.02, currency: 'USD' })
    }
    expect(await stats('1h')).toMatchObject({ received: 0 })
    expect(await stats('all')).toMatchObject({ received: 56 })
  })

  it("leaves sandbox mail out of usage and cost, a sandbox key's or a sandbox order's, and counts it as received", async () => {
    const { order: sandboxOrder } = await addOrder(env, { sandbox: true })
    const t = at('2026-11-22T11:30:00Z')
    for (let i = 0; i < 55; i++) await sendAt(t)
    await sendAt(t, {}, { ...env.ctx, sandbox: true })
    await sendAt(t, { id: sandboxOrder.id })
    // 55 messages cost 1.02 (above): the two sandbox messages add nothing.
    expect(await stats('billing')).toMatchObject({ usage: 55, cost: 1.02, received: 57 })
    expect(await stats('1h', { ...env.ctx, sandbox: true })).toMatchObject({ usage: 55, cost: 1.02, received: 57 })
  })

  it("prices with the account's own currency, base and per-message price", async () => {
    const priced = await createTestEnv({
      MAILROOM_CURRENCY: 'EUR',
      MAILROOM_PRICE_BASE: '5',
      MAILROOM_PRICE_PER_MESSAGE: '0.013',
    })
    try {
      for (let i = 0; i < 3; i++)
        await run(sendAdvMail, { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'b' }, priced.ctx)
      // 5 + ceil(3 × 0.013 × 100) / 100 = 5 + ceil(3.9) / 100
      expect(await run(getStats, {}, priced.ctx)).toMatchObject({ currency: 'EUR', usage: 3, cost: 5.04 })
    } finally {
      await priced.close()
    }
  })

  it.each(['week', '1d', 'ALL', '', 5])('refuses the unknown time %j in the schema', (time) => {
    expectSchemaRefusal(getStats, { time }, 'time')
  })
})

describe('cost', () => {
  it.each([
    [1, 0.0002, 0, 1],
    [1, 0.0002, 1, 1.01],
    [1, 0.0002, 50, 1.01],
    [1, 0.0002, 51, 1.02],
    [1, 0.0002, 55, 1.02],
    [1, 0.0002, 100, 1.02],
    [1, 0.0002, 150, 1.03], // 150 × 0.0002 × 100 is 3.0000000000000004 in floating point: still 3 cents
    [1, 0.0002, 350, 1.07], // 7.000000000000001
    [1, 0.0002, 5000, 2],
    [1, 0.0002, 5001, 2.01],
    [0, 0.001, 3, 0.01],
    [10, 0.0003, 1000, 10.3],
    [2.5, 0, 1000, 2.5],
  ])('cost(%d, %d, %d) = %d', (base, perMessage, usage, expected) => {
    expect(cost(base, perMessage, usage)).toBe(expected)
  })
})

describe('windowStart', () => {
  const now = Date.UTC(2026, 10, 22, 12, 34, 56)
  const cycleStart = Date.UTC(2026, 10, 5)
  it.each([
    ['1h', now - 3_600_000],
    ['24h', now - 86_400_000],
    ['7d', now - 7 * 86_400_000],
    ['day', Date.UTC(2026, 10, 22)],
    ['month', Date.UTC(2026, 10, 1)],
    ['billing', cycleStart],
    ['all', null],
  ] as const)('%s starts at %s', (time, expected) => {
    expect(windowStart(time, now, cycleStart)).toBe(expected)
  })

  it('has a case for every window of the schema', () => {
    for (const time of STATS_WINDOWS) expect(windowStart(time, now, cycleStart)).not.toBeUndefined()
  })
})

describe('billingCycle', () => {
  it.each([
    ['mid-cycle', 22, '2026-11-22T12:00:00Z', '2026-11-22T00:00:00Z', '2026-12-22T00:00:00Z'],
    ['the first instant of a cycle', 22, '2026-11-22T00:00:00Z', '2026-11-22T00:00:00Z', '2026-12-22T00:00:00Z'],
    ['the last instant of a cycle', 22, '2026-11-21T23:59:59.999Z', '2026-10-22T00:00:00Z', '2026-11-22T00:00:00Z'],
    ['across a year end', 5, '2026-01-03T10:00:00Z', '2025-12-05T00:00:00Z', '2026-01-05T00:00:00Z'],
    ['into the next year', 1, '2026-12-31T23:00:00Z', '2026-12-01T00:00:00Z', '2027-01-01T00:00:00Z'],
    ['in February', 28, '2026-03-01T00:00:00Z', '2026-02-28T00:00:00Z', '2026-03-28T00:00:00Z'],
    ['on day 1 at midnight', 1, '2026-03-01T00:00:00Z', '2026-03-01T00:00:00Z', '2026-04-01T00:00:00Z'],
  ])('%s (billing day %d, now %s)', (_label, day, now, start, end) => {
    expect(billingCycle(day, Date.parse(now))).toEqual({ start: Date.parse(start), end: Date.parse(end) })
  })
})
