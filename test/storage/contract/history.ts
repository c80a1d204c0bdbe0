import { describe, expect, it } from 'vitest'
import { DAY_MS, HOUR_MS, type VolumeQuery } from '../../../storage/store.js'
import { type Fixture, LEASE_MS, newMessage, outcome, T0, volumeCounts as counts } from './fixture.js'

const MIN = 60_000

/** Every recipient's attempts and each message's volume counts. */
export function historyContract(f: Fixture) {
  describe('history and volume', () => {
    const leased = async (recipients: string[], time = T0) => {
      const m = newMessage(f, { recipients, time })
      const { leased } = await f.store.mail.enqueue(m, { node: 'node-a', now: time })
      return { m, rows: leased! }
    }
    const volume = (query: Partial<VolumeQuery> = {}) =>
      f.store.mail.volume({ orderIds: [f.orderId], from: T0 - DAY_MS, to: T0 + DAY_MS, interval: 'hour', ...query })

    it("tells a message of the account with its fields and its recipients in the envelope's order, and no other account's", async () => {
      const m = newMessage(f, {
        recipients: ['b@b.example', 'a@c.example'],
        headerFrom: 'boss@a.example',
        replyTo: 'replies@a.example',
        messageId: '<x@a.example>',
        interface: 'feeder',
        transtype: 'ESMTPSA',
      })
      await f.store.mail.enqueue(m)
      const story = await f.store.mail.message(m.txid, f.accountId)
      expect(story).toEqual({
        rowId: expect.any(Number),
        txid: m.txid,
        orderId: f.orderId,
        envFrom: m.envFrom,
        headerFrom: 'boss@a.example',
        replyTo: 'replies@a.example',
        subject: m.subject,
        messageId: '<x@a.example>',
        bodySize: Buffer.concat(m.raw).length,
        origin: m.origin,
        transtype: 'ESMTPSA',
        interface: 'feeder',
        createdAt: T0,
        sandbox: false,
        recipients: ['b@b.example', 'a@c.example'].map((recipient) => ({
          recipient,
          state: 'queued',
          attempts: 0,
          nextAttemptAt: T0,
          listed: false,
          listedBy: null,
          history: [],
        })),
      })
      // Its bytes, found by its row while a recipient still needs them.
      expect(await f.store.queue.body(story!.rowId)).toEqual(Buffer.concat(m.raw))
      expect(await f.store.mail.message(m.txid, f.otherAccountId)).toBeUndefined()
      expect(await f.store.mail.message('f'.repeat(18), f.accountId)).toBeUndefined()
    })

    it('keeps every attempt of a recipient deferred then delivered, in order, with its MX, address, TLS and reply', async () => {
      const { m, rows } = await leased(['later@b.example', 'now@b.example'])
      const [later, now] = rows
      const retry = T0 + 5 * MIN
      await f.store.queue.record([outcome(later.id, 'deferred', retry, T0 + 1000), outcome(now.id, 'delivered')])
      const [item] = await f.store.queue.claim({ node: 'node-b', now: retry, leaseMs: LEASE_MS, limit: 10 })
      expect(item.id).toBe(later.id)
      await f.store.queue.record([
        { ...outcome(later.id, 'delivered', null, retry + 2000), mxAddress: '192.0.2.26', tlsPolicy: 'enforce' },
      ])
      // A late outcome of a row already final is not an attempt.
      await f.store.queue.record([outcome(later.id, 'failed', null, retry + 3000)])
      const story = await f.store.mail.message(m.txid, f.accountId)
      expect(story?.recipients).toEqual([
        {
          recipient: 'later@b.example',
          state: 'delivered',
          attempts: 2,
          nextAttemptAt: null,
          listed: false,
          listedBy: null,
          history: [
            {
              time: T0 + 1000,
              state: 'deferred',
              code: 451,
              response: '4.7.1 try again later',
              mxHostname: 'mx.deferred.example',
              mxAddress: '192.0.2.25',
              tls: true,
              nextAttemptAt: retry,
              suppressed: false,
              tlsPolicy: 'testing',
              tlsPolicyDomain: 'b.example',
              certValid: false,
            },
            {
              time: retry + 2000,
              state: 'delivered',
              code: 250,
              response: '2.0.0 ok',
              mxHostname: 'mx.delivered.example',
              mxAddress: '192.0.2.26',
              tls: true,
              nextAttemptAt: null,
              suppressed: false,
              tlsPolicy: 'enforce',
              tlsPolicyDomain: 'b.example',
              certValid: true,
            },
          ],
        },
        expect.objectContaining({ recipient: 'now@b.example', state: 'delivered', attempts: 1 }),
      ])
      // Every recipient final: its bytes are no longer kept.
      expect(await f.store.queue.body(story!.rowId)).toBeUndefined()
      expect(await volume()).toEqual([counts(T0, { accepted: 2, deferred: 1, delivered: 2 })])
    })

    it('keeps an attempt without a connection as such (no address, no TLS), and a bounce that suppressed', async () => {
      const { m, rows } = await leased(['down@b.example', 'gone@b.example'])
      const [down, gone] = rows
      await f.store.queue.record([
        {
          ...outcome(down.id, 'deferred', T0 + MIN),
          code: null,
          mxAddress: null,
          tls: null,
          certValid: null,
          tlsPolicy: 'none',
          response: 'timed out',
        },
        { ...outcome(gone.id, 'failed'), suppressed: true },
      ])
      await f.store.blocks.addToList({
        accountId: f.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'Gone@b.example',
        reason: 'bounced',
        now: T0,
      })
      const story = async () => (await f.store.mail.message(m.txid, f.accountId))!.recipients
      expect((await story()).map((r) => [r.recipient, r.state, r.listed, r.history])).toEqual([
        [
          'down@b.example',
          'deferred',
          false,
          [
            expect.objectContaining({
              code: null,
              response: 'timed out',
              mxAddress: null,
              tls: null,
              suppressed: false,
              tlsPolicy: 'none',
              certValid: null,
            }),
          ],
        ],
        [
          'gone@b.example',
          'failed',
          true,
          [expect.objectContaining({ state: 'failed', code: 550, tls: false, suppressed: true })],
        ],
      ])
      expect((await story())[0].nextAttemptAt).toBe(T0 + MIN)
      // Delisted, the address is no longer on the list; its history still says what happened.
      await f.store.blocks.delist(f.accountId, 'gone@b.example')
      expect((await story())[1]).toMatchObject({ listed: false, history: [{ suppressed: true }] })
    })

    it('fails a delivered recipient once when a bounce comes after its 250, with its event, and tells who put it on the list', async () => {
      await f.store.webhooks.create({
        accountId: f.accountId,
        url: 'https://hooks.example/in',
        events: ['message.failed'],
        description: null,
        secret: 'whsec_c2VjcmV0',
        now: T0,
      })
      const { m, rows } = await leased(['gone@b.example', 'later@b.example', 'left@b.example'])
      const [gone, later, left] = rows
      await f.store.queue.record([outcome(gone.id, 'delivered'), outcome(left.id, 'delivered')])
      expect(await f.store.queue.delivery(gone.id)).toEqual({
        id: gone.id,
        txid: m.txid,
        accountId: f.accountId,
        orderId: f.orderId,
        recipient: 'gone@b.example',
        state: 'delivered',
        envFrom: m.envFrom,
        subject: m.subject,
        messageId: null,
        attempts: 1,
      })
      expect(await f.store.queue.delivery(gone.id + 1000)).toBeUndefined()
      const late = (id: number, eventId: string) =>
        f.store.queue.lateFailure({
          id,
          time: T0 + HOUR_MS,
          code: 550,
          response: 'a bounce after delivery: 5.1.1 unknown user',
          suppressed: true,
          events: [
            {
              id: eventId,
              type: 'message.failed',
              accountId: f.accountId,
              time: T0 + HOUR_MS,
              data: {
                transactionId: m.txid,
                recipient: 'x',
                from: 'y',
                subject: null,
                messageId: null,
                code: 550,
                response: 'r',
                mxHost: null,
                attempt: 2,
              },
            },
          ],
        })
      expect(await late(gone.id, 'msg_late')).toBe(true)
      expect(await late(gone.id, 'msg_again')).toBe(false) // failed already
      expect(await late(later.id, 'msg_pending')).toBe(false) // still to deliver
      const claimed = await f.store.webhooks.claim({ node: 'node-a', now: T0 + HOUR_MS, leaseMs: LEASE_MS, limit: 10 })
      expect(claimed.map((c) => c.eventId)).toEqual(['msg_late'])
      // The unsubscribe of `left`, by this message's link: its story says so; another message's entry would not.
      await f.store.blocks.addToList({
        accountId: f.accountId,
        source: 'internal',
        kind: 'recipient',
        address: 'left@b.example',
        reason: 'unsubscribed',
        now: T0 + 2 * HOUR_MS,
        txid: m.txid,
      })
      const story = (await f.store.mail.message(m.txid, f.accountId))!.recipients
      expect(story[0]).toMatchObject({
        state: 'failed',
        attempts: 1,
        listedBy: null,
        history: [
          expect.objectContaining({ state: 'delivered' }),
          expect.objectContaining({ time: T0 + HOUR_MS, state: 'failed', code: 550, suppressed: true }),
        ],
      })
      expect(story[1]).toMatchObject({ state: 'queued', history: [] })
      expect(story[2]).toMatchObject({ listed: true, listedBy: { reason: 'unsubscribed', time: T0 + 2 * HOUR_MS } })
      expect(await volume()).toEqual([counts(T0, { accepted: 3, delivered: 2 }), counts(T0 + HOUR_MS, { failed: 1 })])
    })

    it('makes return-path tokens that any connection opens, case-insensitively, and opens none it did not make', async () => {
      const domain = 'bounces.a.example'
      const token = f.store.queue.returnPathToken(12345, domain)
      expect(token).toMatch(/^b[0-9a-f]{32}$/)
      expect(token).not.toContain('9ix') // the id, 12345 in base 36, is not shown
      expect(f.store.queue.returnPathToken(12346, domain).slice(0, 8)).not.toBe(token.slice(0, 8))
      expect(token.length).toBeLessThanOrEqual(64)
      const other = await f.another()
      expect(other.queue.openReturnPathToken(token, domain)).toBe(12345)
      expect(other.queue.openReturnPathToken(token.toUpperCase(), 'Bounces.A.example')).toBe(12345)
      // Good only at the domain it was made for.
      expect(f.store.queue.openReturnPathToken(token, 'bounces.b.example')).toBeUndefined()
      const flip = (at: number) => `${token.slice(0, at)}${token[at] === '0' ? '1' : '0'}${token.slice(at + 1)}`
      for (const bad of [flip(1), flip(16), flip(32), token.slice(0, -1), `${token}0`, `x${token.slice(1)}`, 'b'])
        expect(f.store.queue.openReturnPathToken(bad, domain), bad).toBeUndefined()
    })

    it("ends a canceled recipient's history with a failure without a reply, counted as failed", async () => {
      const { m, rows } = await leased(['held@b.example', 'later@b.example'])
      const [held, later] = rows
      await f.store.queue.record([outcome(later.id, 'deferred', T0 + HOUR_MS)])
      const at = T0 + 2 * HOUR_MS
      const cancel = () =>
        f.store.queue.cancel({ txid: m.txid, now: at, leaseMs: LEASE_MS, response: 'canceled by the operator' })
      // The row a worker holds (its lease renewed) is left to it; the deferred one fails.
      await f.store.queue.renew('node-a', at)
      expect(await cancel()).toEqual({ changed: 1, inFlight: 1 })
      await f.store.queue.record([outcome(held.id, 'delivered', null, at + 1000)])
      expect(await cancel()).toEqual({ changed: 0, inFlight: 0 })
      const story = (await f.store.mail.message(m.txid, f.accountId))!
      expect(story.recipients.map((r) => [r.recipient, r.state, r.attempts, r.history.map((a) => a.state)])).toEqual([
        ['held@b.example', 'delivered', 1, ['delivered']],
        ['later@b.example', 'failed', 1, ['deferred', 'failed']],
      ])
      expect(story.recipients[1].history[1]).toEqual({
        time: at,
        state: 'failed',
        code: null,
        response: 'canceled by the operator',
        mxHostname: null,
        mxAddress: null,
        tls: null,
        nextAttemptAt: null,
        suppressed: false,
        tlsPolicy: null,
        tlsPolicyDomain: null,
        certValid: null,
      })
      expect(await volume()).toEqual([
        counts(T0, { accepted: 2, deferred: 1 }),
        counts(T0 + 2 * HOUR_MS, { failed: 1, delivered: 1 }),
      ])
    })

    it('counts the messages of a batch, an attempt and a refusal each in the hour it happened, per order', async () => {
      // Accepted together (one commit on every backend), in two hours and two orders.
      const late = T0 + HOUR_MS - 1
      await Promise.all([
        f.store.mail.enqueue(newMessage(f, { recipients: ['a@b.example', 'b@b.example'], time: T0 })),
        f.store.mail.enqueue(newMessage(f, { recipients: ['c@b.example'], time: late })),
        f.store.mail.enqueue(newMessage(f, { recipients: ['d@b.example'], time: T0 + HOUR_MS })),
        f.store.mail.enqueue(newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId })),
      ])
      await f.store.mail.refuse({ orderId: f.orderId, time: late, events: [] })
      await f.store.mail.refuse({ orderId: f.orderId, time: T0 + 3 * HOUR_MS, events: [] })
      await f.store.mail.refuse({ orderId: f.otherOrderId, time: T0, events: [] })
      expect(await volume()).toEqual([
        counts(T0, { accepted: 3, refused: 1 }),
        counts(T0 + HOUR_MS, { accepted: 1 }),
        counts(T0 + 3 * HOUR_MS, { refused: 1 }),
      ])
      // The window's end is not in it; days are UTC days; no order, nothing.
      expect(await volume({ from: T0, to: T0 + HOUR_MS })).toEqual([counts(T0, { accepted: 3, refused: 1 })])
      const day = Math.floor(T0 / DAY_MS) * DAY_MS
      expect(await volume({ from: day, to: day + DAY_MS, interval: 'day' })).toEqual([
        counts(day, { accepted: 4, refused: 2 }),
      ])
      expect(
        await volume({ orderIds: [f.orderId, f.otherOrderId], interval: 'day', from: day, to: day + DAY_MS }),
      ).toEqual([counts(day, { accepted: 5, refused: 3 })])
      expect(await volume({ orderIds: [] })).toEqual([])
    })

    it('counts a report to the sender queued with an outcome as accepted', async () => {
      const { m, rows } = await leased(['gone@b.example'])
      const report = newMessage(f, { envFrom: '', recipients: [m.envFrom], time: T0 + MIN })
      await f.store.queue.record(
        [outcome(rows[0].id, 'failed', null, T0 + MIN)],
        [{ rows: [rows[0].id], action: 'failed', message: report }],
      )
      expect(await volume()).toEqual([counts(T0, { accepted: 2, failed: 1 })])
    })
  })
}
