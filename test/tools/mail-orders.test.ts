import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { cancelMailOrder } from '../../tools/cancel-mail-order.js'
import { createMailOrder } from '../../tools/create-mail-order.js'
import { sendMail } from '../../tools/send-mail.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectNothingQueued, expectRefused, expectSchemaRefusal, run } from './support.js'

describe('createMailOrder and cancelMailOrder', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const orders = () => env.services.store.orders.list(env.accountId)
  const send = (ctx = env.ctx, id?: number) =>
    run(sendMail, { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'b', id }, ctx)

  it('creates an active order with its senders and returns its SMTP password', async () => {
    const made = await run(
      createMailOrder,
      { comment: ' newsletters ', senders: ['News@Example.org', '@example.net', 'news@example.org'] },
      env.ctx,
    )
    expect(made).toEqual({
      id: env.orderId + 1,
      status: 'active',
      username: `mb${env.orderId + 1}`,
      comment: 'newsletters',
      password: expect.any(String),
    })
    expect(made.password).toBe(await env.services.store.orders.password(made.id))
    expect((await env.services.store.orders.get(made.id))?.senders).toEqual(['@example.net', 'news@example.org'])
    const sandbox = await run(createMailOrder, { sandbox: true }, env.ctx)
    expect(sandbox).toMatchObject({ sandbox: true, status: 'active' })
  })

  it('refuses a sender that is neither an address nor an @domain, creating nothing', async () => {
    expectSchemaRefusal(createMailOrder, { senders: ['not an address'] }, 'senders.0')
    expectSchemaRefusal(createMailOrder, { senders: ['@nodot'] }, 'senders.0')
    expect(await orders()).toHaveLength(1)
  })

  it('refuses callers that may not see the password it returns: a sandbox key makes sandbox orders only', async () => {
    await expectRefused(
      run(createMailOrder, {}, { ...env.ctx, sandbox: true }),
      403,
      /^not created: the password sends real mail, and this caller is a sandbox key/,
    )
    await expectRefused(
      run(createMailOrder, {}, { ...env.ctx, scopes: ['mail:read', 'mail:manage'] }),
      403,
      /^not created: the password sends mail, and this access token was not granted the mail:send scope/,
    )
    expect(await orders()).toHaveLength(1)
    expect(await run(createMailOrder, { sandbox: true }, { ...env.ctx, sandbox: true })).toMatchObject({
      sandbox: true,
    })
  })

  it('cancels an order: it sends no more; cancelling again changes nothing', async () => {
    const made = await run(createMailOrder, {}, env.ctx)
    expect(await run(cancelMailOrder, { id: made.id }, env.ctx)).toEqual({
      id: made.id,
      status: 'canceled',
      username: `mb${made.id}`,
    })
    expect((await env.services.store.orders.get(made.id))?.status).toBe('canceled')
    await expectRefused(send(env.ctx, made.id), 404, `id: mail order ${made.id} is canceled`)
    expectNothingQueued(env)
    expect(await run(cancelMailOrder, { id: made.id }, env.ctx)).toMatchObject({ status: 'canceled' })
  })

  it("refuses another account's order as missing, and a sandbox key a real order", async () => {
    const other = await env.newAccount()
    await expectRefused(
      run(cancelMailOrder, { id: other.orderId }, env.ctx),
      404,
      `mail order ${other.orderId} not found`,
    )
    await expectRefused(
      run(cancelMailOrder, { id: env.orderId }, { ...env.ctx, sandbox: true }),
      403,
      'not canceled: a sandbox key may cancel sandbox orders only',
    )
    expect((await env.services.store.orders.get(other.orderId))?.status).toBe('active')
    expect((await env.services.store.orders.get(env.orderId))?.status).toBe('active')
  })
})
