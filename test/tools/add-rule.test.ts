import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { RuleType } from '../../storage/store.js'
import { addRule, RULE_DATA } from '../../tools/add-rule.js'
import { getRules } from '../../tools/get-rules.js'
import { sendMail } from '../../tools/send-mail.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { addOrder, expectRefused, expectSchemaRefusal, run } from './support.js'

/** What each rule type takes as data, and what it refuses. */
const DATA: Record<RuleType, { valid: string[]; invalid: string[] }> = {
  email: {
    valid: ['spam@example.com', 'First.Last+tag@Sub.Example.co.uk'],
    invalid: [
      'spam',
      'spam@example',
      '@example.com',
      'spam@@example.com',
      'spam@example.com, other@example.com',
      'Spam <spam@example.com>',
    ],
  },
  destination: {
    valid: ['bob@example.com', 'BOB@EXAMPLE.COM'],
    invalid: ['bob', 'bob@', 'example.com', 'bob@exa mple.com'],
  },
  domain: {
    valid: ['example.com', 'Mail.Example.co.uk', 'xn--bcher-kva.example'],
    invalid: ['example', 'user@example.com', '-bad.com', 'exa mple.com', '*.example.com', 'example..com'],
  },
  startswith: {
    valid: ['news', 'no-reply', 'a.b_c+d', 'X9'],
    invalid: ['news letter', 'news@', 'news@example.com', 'ünï', 'a/b', 'a*'],
  },
}
const cases = (kind: 'valid' | 'invalid') =>
  (Object.entries(DATA) as [RuleType, (typeof DATA)[RuleType]][]).flatMap(([type, d]) =>
    d[kind].map((data) => [type, data] as const),
  )

describe('RULE_DATA', () => {
  it.each(cases('valid'))('%s accepts %j', (type, data) => {
    expect(RULE_DATA[type].valid(data)).toBe(true)
  })
  it.each(cases('invalid'))('%s refuses %j', (type, data) => {
    expect(RULE_DATA[type].valid(data)).toBe(false)
  })
})

describe('addRule', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const add = (input: Record<string, unknown>, ctx = env.ctx) => run(addRule, input, ctx)
  const allRules = () => env.services.store.rules.list([env.orderId])

  it.each(cases('valid'))(
    'creates a %s rule for %j, stored lower case in the first active order',
    async (type, data) => {
      const result = await add({ type, data })
      const rules = await allRules()
      expect(rules).toHaveLength(1)
      expect(result).toEqual({ status: 'ok', text: String(rules[0].id) })
      expect(rules[0]).toMatchObject({ orderId: env.orderId, type, data: data.toLowerCase(), createdAt: env.clock() })
    },
  )

  it.each(cases('invalid'))('refuses %s data %j with 400 naming data and creates nothing', async (type, data) => {
    await expectRefused(
      add({ type, data }),
      400,
      new RegExp(`^data: .* is not ${RULE_DATA[type].expected.replace(/[.+]/g, '\\$&')} \\(type ${type}\\)`),
    )
    expect(await allRules()).toEqual([])
  })

  it('trims the data', async () => {
    await add({ type: 'domain', data: '  Example.org \n' })
    expect((await allRules()).map((r) => r.data)).toEqual(['example.org'])
  })

  // RFC 5321 §4.1.2: the addresses of the doors are kept canonical, so must a rule's be to match them.
  it.each([
    ['destination', '"de\\ny"@dest.test', 'deny@dest.test'],
    ['email', '"Spam"@example.com', 'spam@example.com'],
    ['destination', '"a\\ b"@example.com', '"a b"@example.com'],
  ] as const)(
    'keeps a %s address spelled %s as %s, and it matches that mailbox however it is written',
    async (type, data, stored) => {
      const { text } = await add({ type, data })
      expect((await allRules()).map((r) => r.data)).toEqual([stored])
      const field = type === 'email' ? 'from' : 'to'
      await expectRefused(
        run(
          sendMail,
          { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b', [field]: data },
          env.ctx,
        ),
        400,
        `deny rule ${text}`,
      )
    },
  )

  it('returns the existing id when the same rule is created again, in any case', async () => {
    const first = await add({ type: 'email', data: 'spam@example.com' })
    const again = await add({ type: 'email', data: 'Spam@Example.COM' })
    expect(again).toEqual(first)
    expect(await allRules()).toHaveLength(1)
    const other = await add({ type: 'destination', data: 'spam@example.com' })
    expect(other.text).not.toBe(first.text)
  })

  it('creates a rule that takes effect and shows in getRules', async () => {
    const { text } = await add({ type: 'domain', data: 'example.org' })
    expect(await run(getRules, {}, env.ctx)).toEqual([
      { id: text, user: `mb${env.orderId}`, type: 'domain', data: 'example.org', created: '2026-11-22 12:00:00' },
    ])
    await expectRefused(
      run(sendMail, { to: 'bob@example.com', from: 'me@Example.org', subject: 's', body: 'b' }, env.ctx),
      400,
      `deny rule ${text}`,
    )
  })

  describe('choosing the order', () => {
    it.each(['user', 'username'])('puts the rule on the order named by %s', async (field) => {
      const { order: second } = await addOrder(env)
      const { text } = await add({ type: 'startswith', data: 'news', [field]: `mb${second.id}` })
      expect((await env.services.store.rules.list([second.id])).map((r) => String(r.id))).toEqual([text])
      expect(await allRules()).toEqual([])
    })

    it('accepts user and username when they agree', async () => {
      const { order: second } = await addOrder(env)
      await add({ type: 'domain', data: 'example.net', user: `mb${second.id}`, username: `mb${second.id}` })
      expect(await env.services.store.rules.list([second.id])).toHaveLength(1)
    })

    it('refuses user and username naming different orders (400)', async () => {
      const { order: second } = await addOrder(env)
      await expectRefused(
        add({ type: 'domain', data: 'example.net', user: `mb${env.orderId}`, username: `mb${second.id}` }),
        400,
        /^user: /,
      )
      expect(await env.services.store.rules.list([env.orderId, second.id])).toEqual([])
    })

    it('uses the next active order when the first is canceled', async () => {
      const { order: second } = await addOrder(env)
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await add({ type: 'domain', data: 'example.net' })
      expect(await env.services.store.rules.list([second.id])).toHaveLength(1)
    })

    it.each<[string, (env: TestEnv) => Promise<string>]>([
      ['an unknown order', async () => 'mb999999'],
      ["another account's order", async (e) => `mb${(await e.newAccount()).orderId}`],
      [
        'a canceled order of the account',
        async (e) => {
          const { order } = await addOrder(e)
          await e.services.store.orders.setStatus(order.id, 'canceled')
          return `mb${order.id}`
        },
      ],
    ])('refuses %s as user with 404 and creates nothing', async (_label, userOf) => {
      const user = await userOf(env)
      await expectRefused(
        add({ type: 'domain', data: 'example.net', user }),
        404,
        new RegExp(`^user: ${user} is not an active mail order`),
      )
      await expectRefused(add({ type: 'domain', data: 'example.net', username: user }), 404, /^user: /)
      const all = (await env.services.store.orders.list(env.accountId)).map((o) => o.id)
      expect(await env.services.store.rules.list([...all, Number(user.slice(2))])).toEqual([])
    })

    it('refuses an account without an active order (404)', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(add({ type: 'domain', data: 'example.net' }), 404, 'no active mail order')
      expect(await allRules()).toEqual([])
    })

    it('checks the data before the order: 400 even without an active order', async () => {
      await env.services.store.orders.setStatus(env.orderId, 'canceled')
      await expectRefused(add({ type: 'domain', data: 'not a domain' }), 400, /^data: /)
    })
  })

  it.each<[string, Record<string, unknown>]>([
    ['type', { type: 'ip', data: '192.0.2.1' }],
    ['type', { type: 'Domain', data: 'example.com' }],
    ['type', { data: 'example.com' }],
    ['data', { type: 'domain' }],
    ['data', { type: 'domain', data: '' }],
    ['data', { type: 'domain', data: '   ' }],
    ['user', { type: 'domain', data: 'example.com', user: 'bob' }],
    ['user', { type: 'domain', data: 'example.com', user: '123' }],
    ['username', { type: 'domain', data: 'example.com', username: 'mbx' }],
  ])('refuses a bad %s in the schema', (path, input) => {
    expectSchemaRefusal(addRule, input, path)
  })
})
