import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { deleteRule } from '../../tools/delete-rule.js'
import { getRules } from '../../tools/get-rules.js'
import { sendMail } from '../../tools/send-mail.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectRefused, expectSchemaRefusal, run } from './support.js'

describe('deleteRule', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const rule = (orderId: number, data = 'example.org') =>
    env.services.store.rules.create({ orderId, type: 'domain', data, now: env.clock() })
  const ruleIds = async (orderIds: number[]) => (await env.services.store.rules.list(orderIds)).map((r) => r.id)

  it('deletes a rule: "record deleted", and it is gone from getRules', async () => {
    const doomed = await rule(env.orderId)
    const kept = await rule(env.orderId, 'example.net')
    expect(await run(deleteRule, { ruleId: doomed.id }, env.ctx)).toEqual({ status: 'ok', text: 'record deleted' })
    expect((await run(getRules, {}, env.ctx)).map((r) => r.id)).toEqual([String(kept.id)])
  })

  it('deletes a rule of any active order of the account', async () => {
    const { order: second } = await addOrder(env)
    const r = await rule(second.id)
    await run(deleteRule, { ruleId: r.id }, env.ctx)
    expect(await ruleIds([second.id])).toEqual([])
  })

  it('lets mail the rule blocked through again', async () => {
    const r = await rule(env.orderId)
    const mail = { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' }
    await expectRefused(run(sendMail, mail, env.ctx), 400, `deny rule ${r.id}`)
    await run(deleteRule, { ruleId: r.id }, env.ctx)
    expect(await run(sendMail, mail, env.ctx)).toMatchObject({ status: 'ok' })
  })

  it('answers 404 for a rule that does not exist, or no longer does', async () => {
    await expectRefused(run(deleteRule, { ruleId: 424242 }, env.ctx), 404, 'ruleId: rule 424242 not found')
    const r = await rule(env.orderId)
    await run(deleteRule, { ruleId: r.id }, env.ctx)
    await expectRefused(run(deleteRule, { ruleId: r.id }, env.ctx), 404, `ruleId: rule ${r.id} not found`)
  })

  it("answers 404 for another account's rule, and leaves it in place", async () => {
    const other = await env.newAccount()
    const theirs = await rule(other.orderId)
    await expectRefused(run(deleteRule, { ruleId: theirs.id }, env.ctx), 404, `ruleId: rule ${theirs.id} not found`)
    expect(await ruleIds([other.orderId])).toEqual([theirs.id])
  })

  it('answers 404 for a rule of a canceled order of the account, and leaves it in place', async () => {
    const { order: second } = await addOrder(env)
    const r = await rule(second.id)
    await env.services.store.orders.setStatus(second.id, 'canceled')
    await expectRefused(run(deleteRule, { ruleId: r.id }, env.ctx), 404, /^ruleId: /)
    expect(await ruleIds([second.id])).toEqual([r.id])
  })

  it.each([[0], [-1], [1.5], ['abc'], ['7'], [null]])('refuses the ruleId %j in the schema', (ruleId) => {
    expectSchemaRefusal(deleteRule, { ruleId }, 'ruleId')
  })

  it('refuses a missing ruleId in the schema', () => {
    expectSchemaRefusal(deleteRule, {}, 'ruleId')
  })
})
