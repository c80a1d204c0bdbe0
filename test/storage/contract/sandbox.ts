import { describe, expect, it } from 'vitest'
import { type Fixture, LEASE_MS, newMessage, outcome, T0 } from './fixture.js'

/** Sandbox keys, orders and messages: the flag is kept, and carried to the worker that delivers. */
export function sandboxContract(f: Fixture) {
  describe('sandbox', () => {
    const claim = (node: string, now: number) => f.store.queue.claim({ node, now, leaseMs: LEASE_MS, limit: 100 })

    it('keeps a key sandbox, and says so with its account; a key is not one unless asked', async () => {
      const sandbox = await f.store.apiKeys.create(f.accountId, T0 + 1, { sandbox: true })
      expect(sandbox.info).toMatchObject({ accountId: f.accountId, sandbox: true, revokedAt: null })
      expect(await f.store.apiKeys.owner(sandbox.key)).toMatchObject({ accountId: f.accountId, sandbox: true })
      expect(await f.store.apiKeys.owner(f.apiKey)).toMatchObject({ accountId: f.accountId, sandbox: false })
      expect(await f.store.apiKeys.authenticate(sandbox.key)).toBe(f.accountId)
      expect(await f.store.apiKeys.owner(`${sandbox.key}x`)).toBeUndefined()
      expect((await f.store.apiKeys.list(f.accountId)).map((k) => k.sandbox)).toEqual([false, true])
      expect(await f.store.apiKeys.revoke(sandbox.info.id, T0 + 2)).toBe(true)
      expect(await f.store.apiKeys.owner(sandbox.key)).toBeUndefined()
    })

    it('keeps an order sandbox; an order is not one unless asked', async () => {
      const { order } = await f.store.orders.create({
        accountId: f.accountId,
        comment: null,
        senders: [],
        now: T0,
        sandbox: true,
      })
      expect(order.sandbox).toBe(true)
      expect(await f.store.orders.get(order.id)).toMatchObject({ sandbox: true })
      expect((await f.store.orders.list(f.accountId)).map((o) => [o.id, o.sandbox])).toEqual([
        [f.orderId, false],
        [order.id, true],
      ])
    })

    it('hands a sandbox message to the worker as sandbox, leased at once or claimed, and others as real', async () => {
      const sandbox = newMessage(f, { sandbox: true, recipients: ['one@b.example', 'two@c.example'] })
      const { leased } = await f.store.mail.enqueue(sandbox, { node: 'node-a', now: T0 })
      expect(leased?.map((i) => i.sandbox)).toEqual([true, true])
      await f.store.mail.enqueue(newMessage(f, { sandbox: true, recipients: ['three@b.example'] }))
      await f.store.mail.enqueue(newMessage(f, { recipients: ['real@b.example'] }))
      const claimed = await claim('node-b', T0)
      expect(claimed.map((i) => [i.recipient, i.sandbox]).sort()).toEqual([
        ['real@b.example', false],
        ['three@b.example', true],
      ])
    })

    it('marks sandbox mail in the log, and leaves it out of the usage of the billing cycle', async () => {
      const real = newMessage(f, { recipients: ['a@b.example', 'b@b.example'] })
      const sandbox = newMessage(f, { sandbox: true, recipients: ['c@b.example'] })
      const early = newMessage(f, { sandbox: true, time: T0 - 120_000 })
      for (const m of [early, real, sandbox, newMessage(f, { sandbox: true, orderId: f.otherOrderId })])
        await f.store.mail.enqueue(m)
      const log = await f.store.mail.log({ orderId: f.orderId, skip: 0, limit: 10, dir: 'asc', groupby: 'recipient' })
      expect(log.rows.map((r) => [r.id, r.recipient, r.sandbox])).toEqual([
        [early.txid, 'rcpt@b.example', 1],
        [real.txid, 'a@b.example', 0],
        [real.txid, 'b@b.example', 0],
        [sandbox.txid, 'c@b.example', 1],
      ])
      const stats = (cycleStart: number) =>
        f.store.mail.stats({ orderIds: [f.orderId], since: null, cycleStart, cycleEnd: T0 + 60_000, top: 10 })
      // Sandbox mail is in the statistics, but never billed.
      expect(await stats(T0 - 60_000)).toMatchObject({ usage: 1, received: 3 })
      expect(await stats(T0 - 180_000)).toMatchObject({ usage: 1, received: 3 })
      expect(await stats(T0 + 60_000)).toMatchObject({ usage: 0, received: 3 })
      // Counted again with more of it: what a kept count of the cycle must add.
      await f.store.mail.enqueue(newMessage(f, { sandbox: true }))
      await f.store.mail.enqueue(newMessage(f))
      expect(await stats(T0 - 180_000)).toMatchObject({ usage: 2, received: 5 })
    })

    it('leaves the reports to senders it queues out of the usage, as sandbox mail', async () => {
      const m = newMessage(f, { recipients: ['gone@b.example'] })
      const { leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      // A report as relay/reports.ts writes it: from the null sender, interface 'report'.
      const report = newMessage(f, { envFrom: '', recipients: [m.envFrom], transtype: 'DSN', interface: 'report' })
      const reportSandbox = newMessage(f, { ...report, txid: `${report.txid}s`, sandbox: true })
      await f.store.queue.record(
        [outcome(leased![0].id, 'failed', T0 + 1000)],
        [{ action: 'failed', rows: [leased![0].id], message: report }],
      )
      await f.store.mail.enqueue(reportSandbox)
      const stats = await f.store.mail.stats({
        orderIds: [f.orderId],
        since: null,
        cycleStart: T0 - 60_000,
        cycleEnd: T0 + 60_000,
        top: 10,
      })
      // Three messages stored and in the statistics; the one the account sent is billed.
      expect(stats).toMatchObject({ usage: 1, received: 3 })
    })

    it('queues a report about sandbox mail as sandbox mail', async () => {
      const m = newMessage(f, { sandbox: true, recipients: ['gone@b.example'] })
      const { leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: T0 })
      const report = newMessage(f, { envFrom: '', recipients: [m.envFrom], sandbox: true })
      expect(
        await f.store.queue.record(
          [outcome(leased![0].id, 'failed')],
          [{ rows: [leased![0].id], action: 'failed', message: report }],
        ),
      ).toEqual([report.txid])
      expect((await claim('node-b', T0)).map((i) => [i.txid, i.sandbox])).toEqual([[report.txid, true]])
    })
  })
}
