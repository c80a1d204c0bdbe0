import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getMailOrders } from '../../tools/get-mail-orders.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectRefused, run } from './support.js'

describe('getMailOrders', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  it('lists the account order with its SMTP username, without a comment key when it has none', async () => {
    const result = await run(getMailOrders, {}, env.ctx)
    expect(result).toEqual([{ id: env.orderId, status: 'active', username: `mb${env.orderId}` }])
    expect(result[0]).not.toHaveProperty('comment')
    expect(result[0]).not.toHaveProperty('password')
    expect(getMailOrders.output.parse(result)).toEqual(result)
  })

  it('lists every order, active and canceled, by id, with comments', async () => {
    const { order: second } = await addOrder(env, { comment: 'newsletter' })
    const { order: third } = await addOrder(env)
    await env.services.store.orders.setStatus(env.orderId, 'canceled')
    expect(await run(getMailOrders, {}, env.ctx)).toEqual([
      { id: env.orderId, status: 'canceled', username: `mb${env.orderId}` },
      { id: second.id, status: 'active', username: `mb${second.id}`, comment: 'newsletter' },
      { id: third.id, status: 'active', username: `mb${third.id}` },
    ])
  })

  it("never shows another account's orders", async () => {
    const other = await env.newAccount()
    expect((await run(getMailOrders, {}, env.ctx)).map((o) => o.id)).toEqual([env.orderId])
    expect((await run(getMailOrders, {}, other.ctx)).map((o) => o.id)).toEqual([other.orderId])
  })

  it('refuses a caller without an account (401)', async () => {
    await expectRefused(run(getMailOrders, {}, { ...env.ctx, accountId: null }), 401, 'API key')
  })
})
