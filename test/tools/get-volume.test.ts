import { describe, expect, it } from 'vitest'
import { getVolume, MAX_BUCKETS } from '../../tools/get-volume.js'
import { getMessage } from '../../tools/get-message.js'
import { sendMail } from '../../tools/send-mail.js'
import type { ToolContext } from '../../tools/define.js'
import { call, mcpClient } from '../helpers.js'
import { FIRST_RETRY_MS, testEnvs } from './envs.js'
import { addOrder, expectRefused, expectSchemaRefusal, run, storedCounts } from './support.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR
/** The test clock's start: 2026-11-22 12:00 UTC. */
const NOW = Date.UTC(2026, 10, 22, 12)
const iso = (ms: number) => new Date(ms).toISOString()

describe('getVolume', () => {
  const envs = testEnvs()
  const send = async (ctx: ToolContext, to: string | string[], extra: Record<string, unknown> = {}) =>
    (await run(sendMail, { from: 'me@example.org', to, subject: 'volume', body: 'x', ...extra }, ctx)).text
  const volume = (ctx: ToolContext, input: Record<string, unknown> = {}) => run(getVolume, input, ctx)
  /** The buckets that counted something. */
  const nonZero = (v: Awaited<ReturnType<typeof volume>>) =>
    v.buckets.filter((b) => b.accepted + b.delivered + b.deferred + b.failed + b.refused > 0)

  it('counts recipients accepted, attempts delivered, deferred and failed, and refusals, each in its hour', async () => {
    const d = await envs.delivering()
    let asked = 0
    d.sink.state.rcptRule = (rcpt) =>
      rcpt.startsWith('gone')
        ? { code: 550, message: '5.1.1 user unknown' }
        : rcpt.startsWith('later') && asked++ === 0
          ? { code: 451, message: '4.7.1 try again later' }
          : undefined
    await d.env.services.store.rules.create({
      orderId: d.env.orderId,
      type: 'destination',
      data: 'deny@example.com',
      now: d.env.clock(),
    })
    const txid = await send(d.ctx, ['later@example.com', 'gone@example.com'])
    await expectRefused(send(d.ctx, 'deny@example.com'), 400, /deny rule/)
    const attempted = async (n: number) =>
      expect
        .poll(async () => (await run(getMessage, { id: txid }, d.ctx)).recipients.map((r) => r.attempts), {
          timeout: 15_000,
          interval: 50,
        })
        .toEqual([n, 1])
    await attempted(1)
    d.later(FIRST_RETRY_MS)
    await attempted(2)
    // Another account's mail is its own.
    const other = await d.env.newAccount()
    await send(d.ctxOf(other.ctx), 'elsewhere@example.com')
    // The bounce's report to the sender is mail of the order too: one more recipient accepted,
    // whose delivery fails (example.org has no MX here).
    const expected = { accepted: 3, delivered: 1, deferred: 1, failed: 2, refused: 1 }
    await expect
      .poll(async () => (await volume(d.ctx, { interval: 'hour' })).totals, { timeout: 15_000, interval: 50 })
      .toEqual(expected)

    const hours = await volume(d.ctx, { interval: 'hour' })
    expect(hours.buckets).toHaveLength(48)
    expect(hours).toMatchObject({ interval: 'hour', startTime: iso(NOW - 47 * HOUR), endTime: iso(NOW + HOUR) })
    expect(hours.buckets.map((b) => b.time)).toEqual(Array.from({ length: 48 }, (_, i) => iso(NOW - (47 - i) * HOUR)))
    expect(nonZero(hours)).toEqual([{ time: iso(NOW), ...expected }])
    expect(getVolume.output.parse(hours)).toEqual(hours)
    expect((await volume(d.ctxOf(other.ctx), { interval: 'hour' })).totals.accepted).toBe(1)
  })

  it('answers the last 7 UTC days by default, every day present, oldest first', async () => {
    const env = await envs.plain()
    const today = Date.UTC(2026, 10, 22)
    env.clock.set(today - 2 * DAY + 5 * HOUR)
    await send(env.ctx, ['a@example.com', 'b@example.com'])
    env.clock.set(today - 1)
    await send(env.ctx, 'c@example.com')
    env.clock.set(today)
    await send(env.ctx, 'd@example.com')
    env.clock.set(NOW)
    const days = await volume(env.ctx)
    expect(days).toMatchObject({ interval: 'day', startTime: iso(today - 6 * DAY), endTime: iso(today + DAY) })
    expect(days.buckets.map((b) => [b.time, b.accepted])).toEqual([
      [iso(today - 6 * DAY), 0],
      [iso(today - 5 * DAY), 0],
      [iso(today - 4 * DAY), 0],
      [iso(today - 3 * DAY), 0],
      [iso(today - 2 * DAY), 2],
      [iso(today - DAY), 1],
      [iso(today), 1],
    ])
  })

  it('takes its window as viewMailLog takes dates: in words, or Unix seconds, whole buckets', async () => {
    const env = await envs.plain()
    env.clock.set(Date.UTC(2026, 10, 20, 23, 30))
    await send(env.ctx, 'a@example.com')
    env.clock.set(NOW)
    const words = await volume(env.ctx, { startTime: '2026-11-20', endTime: 'yesterday' })
    expect(words.buckets.map((b) => [b.time, b.accepted])).toEqual([
      [iso(Date.UTC(2026, 10, 20)), 1],
      [iso(Date.UTC(2026, 10, 21)), 0],
    ])
    expect(words.endTime).toBe(iso(Date.UTC(2026, 10, 22)))
    const seconds = await volume(env.ctx, {
      interval: 'hour',
      startTime: Date.UTC(2026, 10, 20, 22, 59, 59) / 1000,
      endTime: Date.UTC(2026, 10, 21, 0, 0) / 1000,
    })
    expect(seconds.buckets.map((b) => [b.time, b.accepted])).toEqual([
      [iso(Date.UTC(2026, 10, 20, 22)), 0],
      [iso(Date.UTC(2026, 10, 20, 23)), 1],
      [iso(Date.UTC(2026, 10, 21, 0)), 0],
    ])
  })

  it("counts one order with `user`, and refuses another account's order with 404, storing nothing", async () => {
    const env = await envs.plain()
    const { order } = await addOrder(env)
    await send(env.ctx, 'a@example.com')
    await send(env.ctx, ['b@example.com', 'c@example.com'], { id: order.id })
    expect((await volume(env.ctx)).totals.accepted).toBe(3)
    expect((await volume(env.ctx, { user: `mb${order.id}` })).totals.accepted).toBe(2)
    expect((await volume(env.ctx, { user: `mb${env.orderId}` })).totals.accepted).toBe(1)
    // A canceled order's history stays readable.
    await env.services.store.orders.setStatus(order.id, 'canceled')
    expect((await volume(env.ctx, { user: `mb${order.id}` })).totals.accepted).toBe(2)
    const other = await env.newAccount()
    const before = storedCounts(env)
    const refused = await expectRefused(volume(env.ctx, { user: `mb${other.orderId}` }), 404, /^user: /)
    expect(refused.message).toBe(`user: mb${other.orderId} is not a mail order of this account`)
    expect(storedCounts(env)).toEqual(before)
  })

  it.each([
    [
      'a window of more than 1000 buckets',
      { interval: 'hour', startTime: '2026-01-01' },
      /^startTime: the window holds 7813 hours, more than 1000; narrow it or use interval=day$/,
    ],
    ['a start after the end', { startTime: '2026-11-22', endTime: '2026-11-20' }, /^startTime: it is after endTime$/],
    ['a date it cannot read', { startTime: 'soonish' }, /^startTime: "soonish" is not a date or a Unix timestamp$/],
  ])('refuses %s with 400', async (_label, input, message) => {
    const env = await envs.plain()
    await expectRefused(volume(env.ctx, input), 400, message)
  })

  it('answers the most buckets it allows', async () => {
    const env = await envs.plain()
    const v = await volume(env.ctx, { interval: 'hour', startTime: (NOW - (MAX_BUCKETS - 1) * HOUR) / 1000 })
    expect(v.buckets).toHaveLength(MAX_BUCKETS)
  })

  it.each([
    ['interval', { interval: 'week' }],
    ['user', { user: 'bob' }],
  ])('refuses a bad %s in the schema', (path, input) => {
    expectSchemaRefusal(getVolume, input, path)
  })

  describe('over REST and MCP', () => {
    it('is GET /mail/volume, which the contract’s GET /mail/{id} never takes', async () => {
      const env = await envs.plain()
      await send(env.ctx, 'a@example.com')
      const res = await call(env, 'GET', '/mail/volume?interval=hour&startTime=today')
      expect(res.status).toBe(200)
      const body = (await res.json()) as Awaited<ReturnType<typeof volume>>
      expect(body).toEqual(await volume(env.ctx, { interval: 'hour', startTime: 'today' }))
      expect(body.buckets).toHaveLength(13)
      expect(body.totals.accepted).toBe(1)
      // Not an order id: getMailOrderById would have refused `volume` as one.
      expect(body).not.toHaveProperty('password')
      expect((await call(env, 'POST', '/mail/volume')).status).toBe(405)
      const bad = await call(env, 'GET', '/mail/volume?interval=week')
      expect(bad.status).toBe(400)
      expect((await call(env, 'GET', '/mail/volume', undefined, { apiKey: null })).status).toBe(401)
    })

    it('is the getVolume tool over MCP Streamable HTTP', async () => {
      const { env, base } = await envs.served()
      await send(env.ctx, ['a@example.com', 'b@example.com'])
      const client = await mcpClient(base, env.apiKey)
      envs.keep(client)
      const result = await client.callTool({ name: 'getVolume', arguments: { interval: 'hour' } })
      expect(result.isError).toBeFalsy()
      expect(result.structuredContent).toEqual(await volume(env.ctx, { interval: 'hour' }))
      expect((result.structuredContent as { totals: { accepted: number } }).totals.accepted).toBe(2)
    })
  })
})
