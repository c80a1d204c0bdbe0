import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SENT_BEFORE } from '../../storage/sqlite/approval.js'
import { openSqliteStore } from '../../storage/sqlite/index.js'
import { newMessage, T0 } from './contract/fixture.js'

const ACCOUNT = { name: 'a', currency: 'USD', priceBase: 1, pricePerMessage: 0, billingDay: 1, createdAt: T0 }

// A send under a policy that asks about new recipients looks each one up in the whole log of its
// account: a seek into an index per address and per domain, never a walk of the domain's rows.
describe('send policy query plans', () => {
  const store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
  afterAll(() => store.close())
  const plan = (sql: string, params: Record<string, unknown>) =>
    (store.sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail)

  beforeAll(async () => {
    const f = { accountId: (await store.accounts.create(ACCOUNT)).id, orderId: 0 }
    for (let o = 0; o < 3; o++)
      f.orderId = (await store.orders.create({ accountId: f.accountId, comment: null, senders: [], now: T0 })).order.id
    // One big domain: most of the log goes to it, as to a large mail provider.
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        store.mail.enqueue(
          newMessage(f, { recipients: Array.from({ length: 10 }, (_, r) => `user${i}-${r}@big.example`) }),
        ),
      ),
    )
    // The planner's statistics, as `mailroom serve` gathers them (PRAGMA optimize).
    store.sqlite.exec('ANALYZE')
  })

  it('finds an address from the (order_id, recipient) index', () => {
    const steps = plan(SENT_BEFORE.address, { accountId: 1, spellings: '["user1-1@big.example"]' })
    expect(steps.join(' | ')).toMatch(
      /SEARCH deliveries USING INDEX deliveries_order_recipient \(order_id=\? AND recipient=\?\)/,
    )
    expect(steps.filter((s) => /^SCAN (deliveries|mail_orders)\b/.test(s))).toEqual([])
  })

  it('finds a domain from the (order_id, domain) index', () => {
    const steps = plan(SENT_BEFORE.domain, { accountId: 1, domain: 'big.example' })
    expect(steps.join(' | ')).toMatch(
      /SEARCH deliveries USING INDEX deliveries_order_domain \(order_id=\? AND domain=\?\)/,
    )
    expect(steps.filter((s) => /^SCAN (deliveries|mail_orders)\b/.test(s))).toEqual([])
  })

  it('answers from those indexes', async () => {
    const { addresses, domains } = await store.mail.sentBefore(1, [
      'user1-1@big.example',
      'new@big.example',
      'x@new.example',
    ])
    expect([...addresses]).toEqual(['user1-1@big.example'])
    expect([...domains]).toEqual(['big.example'])
  })
})
