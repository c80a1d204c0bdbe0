import { afterEach, describe, expect, it } from 'vitest'
import { WEBHOOK_ACCOUNT_CONCURRENCY, WEBHOOK_ENDPOINT_CONCURRENCY, WebhookWorker } from '../../relay/webhooks.js'
import { sendMail } from '../../tools/send-mail.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { run } from '../tools/support.js'
import { stubResolver } from './sink.js'
import { startEndpoint } from './webhook-endpoint.js'

// The webhook worker's slots are shared by every account: one account's slow endpoints take at
// most its share, and another account's events go on through the rest.
describe('webhook worker: shares of the slots', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it("posts another account's event while one account's six endpoints hang, holding at most its share", async () => {
    const env: TestEnv = await createTestEnv({ MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true' })
    cleanup.push(() => env.close())
    const slow = await startEndpoint(() => 'hang')
    cleanup.push(() => slow.close())
    const fast = await startEndpoint()
    cleanup.push(() => fast.close())
    const { webhooks } = env.services.store
    const hook = (accountId: number, url: string) =>
      webhooks.create({
        accountId,
        url,
        events: ['message.accepted'],
        description: null,
        secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
        now: env.clock(),
      })
    // Account A: six endpoints, each with six events waiting; account B: one endpoint, one event, the newest.
    for (let n = 1; n <= 6; n++) await hook(env.accountId, `${slow.url}/${n}`)
    for (let m = 0; m < 3; m++)
      await run(
        sendMail,
        { from: 'me@example.org', to: [`a${m}@x.test`, `b${m}@x.test`], subject: 's', body: 'b' },
        env.ctx,
      )
    const b = await env.newAccount()
    await hook(b.accountId, fast.url)
    await run(sendMail, { from: 'me@example.org', to: 'b@x.test', subject: 'from B', body: 'b' }, b.ctx)
    expect(await webhooks.pending()).toBe(6 * 6 + 1)

    const worker = new WebhookWorker({ ...env.services, resolver: stubResolver({}) })
    await worker.start()
    cleanup.push(() => worker.stop())
    await expect.poll(() => fast.received.length, { timeout: 30_000 }).toBe(1)
    expect(fast.received[0].event.data).toMatchObject({ subject: 'from B' })
    // When B's event arrived, A's posts were all still hanging (each for 10 s): A held its share, no more.
    await expect.poll(() => slow.received.length).toBeGreaterThanOrEqual(WEBHOOK_ACCOUNT_CONCURRENCY)
    expect(slow.received).toHaveLength(WEBHOOK_ACCOUNT_CONCURRENCY)
    const perEndpoint = new Map<string, number>()
    for (const r of slow.received) perEndpoint.set(r.url, (perEndpoint.get(r.url) ?? 0) + 1)
    expect(Math.max(...perEndpoint.values())).toBeLessThanOrEqual(WEBHOOK_ENDPOINT_CONCURRENCY)
    // The events handed back are still waiting, for a later turn.
    expect(await webhooks.pending()).toBe(6 * 6)
  })

  it('hands back again the events past a share whose hand-back failed, and posts them', async () => {
    const env: TestEnv = await createTestEnv({ MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true' })
    cleanup.push(() => env.close())
    const endpoint = await startEndpoint()
    cleanup.push(() => endpoint.close())
    const { webhooks } = env.services.store
    await webhooks.create({
      accountId: env.accountId,
      url: endpoint.url,
      events: ['message.accepted'],
      description: null,
      secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      now: env.clock(),
    })
    // Three events for one endpoint: one past its share of two, whose first hand-back fails.
    const to = ['a@x.test', 'b@x.test', 'c@x.test']
    await run(sendMail, { from: 'me@example.org', to, subject: 's', body: 'b' }, env.ctx)
    const { release } = webhooks
    let failures = 0
    webhooks.release = async (node, ids) => {
      if (ids && failures++ === 0) throw new Error('the database is busy')
      return release(node, ids)
    }
    const worker = new WebhookWorker({ ...env.services, resolver: stubResolver({}) })
    await worker.start()
    cleanup.push(() => worker.stop())
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBe(3)
    expect(endpoint.received.map((r) => r.event.data.recipient).sort()).toEqual(to)
    expect(failures).toBeGreaterThan(1)
  })
})
