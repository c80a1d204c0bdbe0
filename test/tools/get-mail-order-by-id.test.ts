import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getMailOrderById } from '../../tools/get-mail-order-by-id.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectRefused, expectSchemaRefusal, run } from './support.js'

describe('getMailOrderById', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  it('returns the order with its current SMTP password', async () => {
    const { order, password } = await addOrder(env, { comment: 'transactional' })
    const result = await run(getMailOrderById, { id: order.id }, env.ctx)
    expect(result).toEqual({
      id: order.id,
      status: 'active',
      username: `mb${order.id}`,
      comment: 'transactional',
      password,
    })
    expect(password.length).toBeGreaterThanOrEqual(20)
    expect(getMailOrderById.output.parse(result)).toEqual(result)
  })

  it.each([
    ['a sandbox key', { sandbox: true }, /this caller is a sandbox key/],
    ["a sandbox key's token", { sandbox: true, scopes: ['mail:read', 'mail:send'] }, /this caller is a sandbox key/],
    ['a token without mail:send', { scopes: ['mail:read', 'mail:manage'] }, /not granted the mail:send scope/],
  ])("withholds a real order's password from %s, saying why", async (_label, caller, why) => {
    const result = await run(getMailOrderById, { id: env.orderId }, { ...env.ctx, ...caller })
    expect(result).toEqual({
      id: env.orderId,
      status: 'active',
      username: `mb${env.orderId}`,
      password: '********',
      passwordWithheld: expect.stringMatching(why),
    })
  })

  it("shows the password to a token with mail:send of a real key, and a sandbox order's to a sandbox key", async () => {
    const real = await run(getMailOrderById, { id: env.orderId }, { ...env.ctx, scopes: ['mail:send'] })
    expect(real.password).toBe(await env.services.store.orders.password(env.orderId))
    const { order, password } = await addOrder(env, { sandbox: true })
    expect(await run(getMailOrderById, { id: order.id }, { ...env.ctx, sandbox: true })).toMatchObject({ password })
  })

  it('leaves out the comment when the order has none', async () => {
    const result = await run(getMailOrderById, { id: env.orderId }, env.ctx)
    expect(result).not.toHaveProperty('comment')
    expect(result).toMatchObject({
      id: env.orderId,
      status: 'active',
      username: `mb${env.orderId}`,
      password: expect.any(String),
    })
  })

  it('still shows a canceled order of the account (it is listed by getMailOrders too)', async () => {
    await env.services.store.orders.setStatus(env.orderId, 'canceled')
    expect(await run(getMailOrderById, { id: env.orderId }, env.ctx)).toMatchObject({
      id: env.orderId,
      status: 'canceled',
    })
  })

  it("answers another account's order exactly like a missing one (404)", async () => {
    const other = await env.newAccount()
    const foreign = await expectRefused(run(getMailOrderById, { id: other.orderId }, env.ctx), 404, /^id: /)
    const missing = await expectRefused(run(getMailOrderById, { id: 999_999 }, env.ctx), 404, /^id: /)
    expect(foreign.message).toBe(`id: mail order ${other.orderId} not found`)
    expect(missing.message).toBe('id: mail order 999999 not found')
    expect(foreign.message).not.toMatch(/password|account/)
  })

  it.each([
    ['zero', 0],
    ['negative', -3],
    ['fractional', 1.5],
    ['text', 'abc'],
    ['numeric text (transports coerce, the schema does not)', '1'],
  ])('refuses a %s id in the schema', (_label, id) => {
    expectSchemaRefusal(getMailOrderById, { id }, 'id')
  })

  it('refuses a missing id in the schema', () => {
    expectSchemaRefusal(getMailOrderById, {}, 'id')
  })
})
