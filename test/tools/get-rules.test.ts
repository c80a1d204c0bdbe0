import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getRules } from '../../tools/get-rules.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectRefused, run } from './support.js'

describe('getRules', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const rule = (orderId: number, type: 'domain' | 'email' | 'startswith' | 'destination', data: string) =>
    env.services.store.rules.create({ orderId, type, data, now: env.clock() })

  it('is empty when there are no rules', async () => {
    expect(await run(getRules, {}, env.ctx)).toEqual([])
  })

  it('lists the rules with id as text, the order username, lower-case data and a UTC creation time', async () => {
    const a = await rule(env.orderId, 'domain', 'Spam.Example')
    env.clock.set(Date.UTC(2026, 11, 1, 8, 5, 9))
    const b = await rule(env.orderId, 'email', 'Bad@Example.org')
    const result = await run(getRules, {}, env.ctx)
    expect(result).toEqual([
      {
        id: String(a.id),
        user: `mb${env.orderId}`,
        type: 'domain',
        data: 'spam.example',
        created: '2026-11-22 12:00:00',
      },
      {
        id: String(b.id),
        user: `mb${env.orderId}`,
        type: 'email',
        data: 'bad@example.org',
        created: '2026-12-01 08:05:09',
      },
    ])
    expect(getRules.output.parse(result)).toEqual(result)
  })

  it('lists the rules of every active order, by id', async () => {
    const { order: second } = await addOrder(env)
    const r1 = await rule(second.id, 'startswith', 'news')
    const r2 = await rule(env.orderId, 'destination', 'bob@example.com')
    expect((await run(getRules, {}, env.ctx)).map((r) => [r.id, r.user, r.type, r.data])).toEqual([
      [String(r1.id), `mb${second.id}`, 'startswith', 'news'],
      [String(r2.id), `mb${env.orderId}`, 'destination', 'bob@example.com'],
    ])
  })

  it('leaves out the rules of canceled orders', async () => {
    const { order: second } = await addOrder(env)
    await rule(second.id, 'domain', 'example.net')
    const kept = await rule(env.orderId, 'domain', 'example.org')
    await env.services.store.orders.setStatus(second.id, 'canceled')
    expect((await run(getRules, {}, env.ctx)).map((r) => r.id)).toEqual([String(kept.id)])
  })

  it("never shows another account's rules", async () => {
    const other = await env.newAccount()
    await rule(other.orderId, 'domain', 'theirs.example')
    expect(await run(getRules, {}, env.ctx)).toEqual([])
    expect((await run(getRules, {}, other.ctx)).map((r) => r.data)).toEqual(['theirs.example'])
  })

  it('refuses a caller without an account (401)', async () => {
    await expectRefused(run(getRules, {}, { ...env.ctx, accountId: null }), 401, 'API key')
  })
})
