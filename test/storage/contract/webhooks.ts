import { describe, expect, it } from 'vitest'
import type { WebhookEvent, WebhookEventType } from '../../../storage/store.js'
import { type Fixture, LEASE_MS, newMessage, outcome, T0 } from './fixture.js'

/** An event of the fixture's account (or `accountId`'s). */
const event = (accountId: number, type: WebhookEventType, extra: Partial<WebhookEvent> = {}): WebhookEvent => ({
  id: `msg_${type}_${Math.random().toString(36).slice(2)}`,
  type,
  accountId,
  time: T0,
  data: {
    transactionId: null,
    recipient: 'r@b.example',
    from: 'sender@a.example',
    subject: null,
    messageId: null,
    code: 550,
    response: 'refused',
    mxHost: null,
    attempt: 0,
  },
  ...extra,
})

export function webhooksContract(f: Fixture) {
  describe('webhooks', () => {
    const add = (events: WebhookEventType[], accountId = f.accountId, url = 'https://hooks.example/a') =>
      f.store.webhooks.create({ accountId, url, events, description: null, secret: 'whsec_c2VjcmV0', now: T0 })
    const claim = (node: string, now: number) => f.store.webhooks.claim({ node, now, leaseMs: LEASE_MS, limit: 100 })
    /** Refusals' events (message.refused), written with their counts. */
    const refused = (events: WebhookEvent[]) => f.store.mail.refuse({ orderId: f.orderId, time: T0, events })

    it('keeps an account’s webhooks to it: listed, deleted and claimed only as its own', async () => {
      const mine = await add(['message.accepted', 'message.failed'])
      const theirs = await add(['message.accepted'], f.otherAccountId, 'https://hooks.example/b')
      expect(await f.store.webhooks.list(f.accountId)).toEqual([
        {
          id: mine.id,
          accountId: f.accountId,
          url: 'https://hooks.example/a',
          events: ['message.accepted', 'message.failed'],
          description: null,
          createdAt: T0,
          failingSince: null,
          lastError: null,
          lastErrorAt: null,
          disabledAt: null,
        },
      ])
      expect(await f.store.webhooks.delete(theirs.id, f.accountId)).toBe(false)
      expect(await f.store.webhooks.subscribed(f.accountId, 'message.failed')).toBe(true)
      expect(await f.store.webhooks.subscribed(f.accountId, 'message.delivered')).toBe(false)
      await f.store.mail.enqueue(newMessage(f, { recipients: ['one@b.example', 'two@b.example'] }))
      const claimed = await claim('node-a', T0)
      expect(claimed.map((c) => [c.webhookId, c.accountId, c.type, c.secret])).toEqual([
        [mine.id, f.accountId, 'message.accepted', 'whsec_c2VjcmV0'],
        [mine.id, f.accountId, 'message.accepted', 'whsec_c2VjcmV0'],
      ])
      expect(claimed.map((c) => JSON.parse(c.payload).data.recipient)).toEqual(['one@b.example', 'two@b.example'])
      expect(await f.store.webhooks.delete(mine.id, f.accountId)).toBe(true)
      expect(await f.store.webhooks.list(f.accountId)).toEqual([])
      expect(await f.store.webhooks.pending()).toBe(0)
    })

    it('writes no outbox row for an account without a webhook of the type', async () => {
      await add(['message.delivered'])
      await f.store.mail.enqueue(newMessage(f))
      await f.store.mail.enqueue(newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId }))
      expect(await refused([event(f.accountId, 'message.refused')])).toBe(0)
      expect(await f.store.webhooks.pending()).toBe(0)
    })

    it('writes an outcome’s event with the outcome only: an outcome recorded again is not reported again', async () => {
      const hook = await add(['message.delivered'])
      const { leased } = await f.store.mail.enqueue(newMessage(f), { node: 'node-a', now: T0 })
      const row = leased![0].id
      const delivered = () => [event(f.accountId, 'message.delivered', { row })]
      await f.store.queue.record([outcome(row, 'delivered')], [], delivered())
      await f.store.queue.record([outcome(row, 'delivered')], [], delivered())
      const claimed = await claim('node-a', T0)
      expect(claimed.map((c) => [c.webhookId, c.type])).toEqual([[hook.id, 'message.delivered']])
      const body = JSON.parse(claimed[0].payload)
      expect(body).toEqual({
        type: 'message.delivered',
        timestamp: new Date(T0).toISOString(),
        data: expect.any(Object),
      })
    })

    it('leases an event to one node at a time, keeps its id, retries, drops and disables as told', async () => {
      const hook = await add(['message.refused'])
      const e = event(f.accountId, 'message.refused')
      expect(await refused([e])).toBe(1)
      const [item] = await claim('node-a', T0)
      expect(item).toMatchObject({ eventId: e.id, attempts: 0, failingSince: null, url: 'https://hooks.example/a' })
      expect(await claim('node-b', T0 + LEASE_MS)).toEqual([])
      expect(await f.store.webhooks.renew('node-a', T0 + LEASE_MS / 2)).toBe(1)
      expect(await claim('node-b', T0 + LEASE_MS + 1)).toEqual([])
      // A failure: tried again later, with the same id, and the webhook shows it.
      await f.store.webhooks.record([
        { id: item.id, webhookId: hook.id, ok: false, error: 'HTTP 500', nextAttemptAt: T0 + 5000, now: T0 + 1000 },
      ])
      expect(await claim('node-b', T0 + 4999)).toEqual([])
      const [again] = await claim('node-b', T0 + 5000)
      expect(again).toMatchObject({ id: item.id, eventId: e.id, attempts: 1, failingSince: T0 + 1000 })
      expect((await f.store.webhooks.list(f.accountId))[0]).toMatchObject({
        failingSince: T0 + 1000,
        lastError: 'HTTP 500',
        lastErrorAt: T0 + 1000,
        disabledAt: null,
      })
      // A success: the row goes and the webhook is healthy again (its last error stays to be read).
      await f.store.webhooks.record([
        { id: again.id, webhookId: hook.id, ok: true, nextAttemptAt: null, now: T0 + 6000 },
      ])
      expect(await f.store.webhooks.pending()).toBe(0)
      expect((await f.store.webhooks.list(f.accountId))[0]).toMatchObject({ failingSince: null, lastError: 'HTTP 500' })
      // Out of retries: dropped. Failing too long: disabled, its rows gone, and no new ones.
      await refused([event(f.accountId, 'message.refused'), event(f.accountId, 'message.refused')])
      const [x, y] = await claim('node-a', T0 + 7000)
      await f.store.webhooks.record([
        { id: x.id, webhookId: hook.id, ok: false, error: 'gone', nextAttemptAt: null, now: T0 + 8000 },
      ])
      expect(await f.store.webhooks.pending()).toBe(1)
      await f.store.webhooks.record([
        {
          id: y.id,
          webhookId: hook.id,
          ok: false,
          error: 'gone',
          nextAttemptAt: T0 + 9000,
          disable: true,
          now: T0 + 8000,
        },
      ])
      expect(await f.store.webhooks.pending()).toBe(0)
      expect((await f.store.webhooks.list(f.accountId))[0]).toMatchObject({ disabledAt: T0 + 8000 })
      expect(await f.store.webhooks.subscribed(f.accountId, 'message.refused')).toBe(false)
      expect(await refused([event(f.accountId, 'message.refused')])).toBe(0)
    })

    it('claims none of the webhooks or accounts it is told to skip, and hands back the rows it is given', async () => {
      const a1 = await add(['message.refused'])
      const a2 = await add(['message.refused'], f.accountId, 'https://hooks.example/a2')
      const b = await add(['message.refused'], f.otherAccountId, 'https://hooks.example/b')
      await refused([event(f.accountId, 'message.refused')])
      await f.store.mail.refuse({
        orderId: f.otherOrderId,
        time: T0,
        events: [event(f.otherAccountId, 'message.refused')],
      })
      const claimWith = (skip: { webhooks: number[]; accounts: number[] }) =>
        f.store.webhooks.claim({ node: 'node-a', now: T0, leaseMs: LEASE_MS, limit: 100, skip })
      expect((await claimWith({ webhooks: [a1.id], accounts: [f.otherAccountId] })).map((c) => c.webhookId)).toEqual([
        a2.id,
      ])
      const rest = await claimWith({ webhooks: [], accounts: [] })
      expect(rest.map((c) => c.webhookId).sort()).toEqual([a1.id, b.id].sort())
      // Handed back by id: only those rows are due again, for any node.
      expect(await f.store.webhooks.release('node-a', [rest[0].id])).toBe(1)
      expect((await claim('node-b', T0)).map((c) => c.id)).toEqual([rest[0].id])
    })

    it('hands back the leases of a node that restarts', async () => {
      await add(['message.refused'])
      await refused([event(f.accountId, 'message.refused')])
      expect(await claim('node-a', T0)).toHaveLength(1)
      expect(await f.store.webhooks.release('node-a')).toBe(1)
      expect(await claim('node-b', T0)).toHaveLength(1)
    })
  })
}
