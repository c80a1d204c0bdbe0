import { describe, expect, it } from 'vitest'
import type { NewHold, NewMessage } from '../../../storage/store.js'
import { type Fixture, LEASE_MS, logOf, newMessage, T0 } from './fixture.js'

const HOUR = 3_600_000
const EXPIRY = 'expiry (MAILROOM_APPROVAL_TTL)'

/** What the pipeline tells the store of a hold. */
const newHold = (overrides: Partial<NewHold> = {}): NewHold => ({
  holder: 'key:1',
  holderLabel: 'API key 1',
  reason: 'first mail to b.example',
  expiresAt: T0 + 24 * HOUR,
  approvalUrl: 'https://mail.example/console/approvals?id=x',
  response: 'held for approval: first mail to b.example',
  ...overrides,
})

export function holdsContract(f: Fixture) {
  describe('held messages', () => {
    const claim = (now: number, store = f.store) => store.queue.claim({ node: 'n', now, leaseMs: LEASE_MS, limit: 100 })
    const held = (overrides: Partial<NewMessage> = {}, hold: Partial<NewHold> = {}) => {
      const m = newMessage(f, { recipients: ['one@b.example', 'two@c.example'], ...overrides })
      return f.store.holds.create(
        m,
        newHold({ approvalUrl: `https://mail.example/console/approvals?id=${m.txid}`, ...hold }),
      )
    }
    /** The types of the events the account's webhook was given, in order. */
    const events = async () =>
      (await f.store.webhooks.claim({ node: 'w', now: T0 + 48 * HOUR, leaseMs: LEASE_MS, limit: 100 })).map((e) => ({
        type: e.type,
        data: JSON.parse(e.payload).data,
      }))
    const subscribe = () =>
      f.store.webhooks.create({
        accountId: f.accountId,
        url: 'https://hooks.example/holds',
        events: ['message.accepted', 'message.held', 'message.approved', 'message.rejected'],
        description: null,
        secret: 'whsec_c2VjcmV0',
        now: T0,
      })

    it('stores a held message whole, in the log, but never in the queue', async () => {
      await subscribe()
      const m = newMessage(f, { recipients: ['one@b.example', 'two@c.example'], subject: 'Quarterly report' })
      const hold = await f.store.holds.create(m, newHold())
      expect(hold).toEqual({
        txid: m.txid,
        accountId: f.accountId,
        orderId: f.orderId,
        holder: 'key:1',
        holderLabel: 'API key 1',
        reason: 'first mail to b.example',
        status: 'held',
        createdAt: T0,
        expiresAt: T0 + 24 * HOUR,
        approvalUrl: 'https://mail.example/console/approvals?id=x',
        decidedAt: null,
        decidedBy: null,
        elicitationId: null,
        elicitationState: null,
        envFrom: m.envFrom,
        recipients: ['one@b.example', 'two@c.example'],
        subject: 'Quarterly report',
        messageId: null,
        sandbox: false,
      })
      expect(await f.store.holds.get(m.txid, f.accountId)).toEqual(hold)
      expect(await f.store.holds.get(m.txid)).toEqual(hold)
      expect(await f.store.holds.get(m.txid, f.otherAccountId)).toBeUndefined()
      expect(await f.store.holds.get('unknown')).toBeUndefined()
      // Nothing waits in the queue, however late.
      expect(await claim(T0 + 48 * HOUR)).toEqual([])
      expect(await f.store.queue.pending()).toBe(0)
      expect(await f.store.queue.depth()).toEqual({ recipients: 0, oldestQueuedAt: null })
      expect(await f.store.queue.waiting({ now: T0, leaseMs: LEASE_MS })).toEqual([])
      expect(await f.store.queue.retry({ txid: m.txid, now: T0, leaseMs: LEASE_MS })).toEqual({
        changed: 0,
        inFlight: 0,
      })
      // A cancel changes none of its rows, and leaves its bytes (checked below) to the decision.
      expect(await f.store.queue.cancel({ txid: m.txid, now: T0, leaseMs: LEASE_MS, response: 'canceled' })).toEqual({
        changed: 0,
        inFlight: 0,
      })
      // The log and the story show it, held; its bytes are kept for the person who decides.
      const { total, rows } = await logOf(f)
      expect(total).toBe(2)
      expect(rows.map((r) => [r.id, r.recipient, r.delivered, r.response])).toEqual([
        [m.txid, 'one@b.example', 0, 'held for approval: first mail to b.example'],
        [m.txid, 'two@c.example', 0, 'held for approval: first mail to b.example'],
      ])
      const story = await f.store.mail.message(m.txid, f.accountId)
      expect(story?.recipients.map((r) => [r.recipient, r.state, r.nextAttemptAt])).toEqual([
        ['one@b.example', 'held', null],
        ['two@c.example', 'held', null],
      ])
      expect(story?.hold).toEqual(hold)
      expect((await f.store.queue.body(story!.rowId))?.equals(Buffer.concat(m.raw))).toBe(true)
      // Accepted in the volume, like any message; message.held for the webhooks, no message.accepted yet.
      expect(
        (await f.store.mail.volume({ orderIds: [f.orderId], from: T0, to: T0 + HOUR, interval: 'hour' }))[0],
      ).toMatchObject({ accepted: 2, refused: 0 })
      expect(await events()).toEqual([
        {
          type: 'message.held',
          data: {
            transactionId: m.txid,
            from: m.envFrom,
            recipients: ['one@b.example', 'two@c.example'],
            subject: 'Quarterly report',
            messageId: null,
            reason: 'first mail to b.example',
            holder: 'API key 1',
            approvalUrl: 'https://mail.example/console/approvals?id=x',
            expiresAt: new Date(T0 + 24 * HOUR).toISOString(),
            decidedBy: null,
          },
        },
      ])
    })

    it('a message without a hold has none in its story', async () => {
      const m = newMessage(f)
      await f.store.mail.enqueue(m)
      expect((await f.store.mail.message(m.txid, f.accountId))?.hold ?? null).toBeNull()
    })

    it('approves once: the rows become due at once and the webhooks hear it, then each accepted', async () => {
      await subscribe()
      const hold = await held()
      const later = T0 + HOUR
      const decided = await f.store.holds.decide({
        txid: hold.txid,
        accountId: f.accountId,
        decision: 'approve',
        by: 'API key 1 (console or API)',
        now: later,
      })
      expect(decided).toEqual({
        state: 'decided',
        hold: { ...hold, status: 'approved', decidedAt: later, decidedBy: 'API key 1 (console or API)' },
      })
      expect(await f.store.queue.pending()).toBe(2)
      const items = await claim(later)
      expect(items.map((i) => [i.txid, i.recipient, i.attempts])).toEqual([
        [hold.txid, 'one@b.example', 0],
        [hold.txid, 'two@c.example', 0],
      ])
      // Its acceptance time stays the time it was stored.
      expect(items[0].queuedAt).toBe(T0)
      const { rows } = await logOf(f)
      expect(rows.map((r) => r.response)).toEqual([null, null])
      const story = await f.store.mail.message(hold.txid, f.accountId)
      expect(story?.recipients.map((r) => r.state)).toEqual(['queued', 'queued'])
      expect(story?.hold?.status).toBe('approved')
      // Deciding again, either way, changes nothing.
      for (const decision of ['approve', 'reject'] as const)
        expect(
          await f.store.holds.decide({
            txid: hold.txid,
            decision,
            by: 'the operator (mailroom approvals)',
            now: later + 1,
          }),
        ).toEqual({ state: 'already', hold: decided!.hold })
      expect(await claim(later + 2 * LEASE_MS)).toHaveLength(2)
      const told = await events()
      expect(told.map((e) => [e.type, e.data.recipient ?? null])).toEqual([
        ['message.held', null],
        ['message.approved', null],
        ['message.accepted', 'one@b.example'],
        ['message.accepted', 'two@c.example'],
      ])
      expect(told[1].data).toMatchObject({ transactionId: hold.txid, decidedBy: 'API key 1 (console or API)' })
    })

    it('rejects once: the rows end rejected, the bytes go, and it counts as refused', async () => {
      await subscribe()
      const hold = await held()
      const rowId = (await f.store.mail.message(hold.txid, f.accountId))!.rowId
      const decided = await f.store.holds.decide({
        txid: hold.txid,
        decision: 'reject',
        by: 'the operator (mailroom approvals)',
        now: T0 + 1000,
      })
      expect(decided).toMatchObject({
        state: 'decided',
        hold: { status: 'rejected', decidedAt: T0 + 1000, decidedBy: 'the operator (mailroom approvals)' },
      })
      expect(await f.store.queue.body(rowId)).toBeUndefined()
      expect(await f.opened.bodyParts()).toBe(0)
      expect(await claim(T0 + 48 * HOUR)).toEqual([])
      expect(await f.store.queue.pending()).toBe(0)
      const story = await f.store.mail.message(hold.txid, f.accountId)
      expect(story?.recipients.map((r) => [r.state, r.nextAttemptAt])).toEqual([
        ['rejected', null],
        ['rejected', null],
      ])
      const { rows } = await logOf(f)
      expect(rows.map((r) => r.response)).toEqual([
        `rejected by the operator (mailroom approvals) at ${new Date(T0 + 1000).toISOString()}`,
        `rejected by the operator (mailroom approvals) at ${new Date(T0 + 1000).toISOString()}`,
      ])
      expect(
        (await f.store.mail.volume({ orderIds: [f.orderId], from: T0, to: T0 + HOUR, interval: 'hour' }))[0],
      ).toMatchObject({ accepted: 2, refused: 1 })
      expect(
        await f.store.holds.decide({ txid: hold.txid, decision: 'approve', by: 'API key 1', now: T0 + 2000 }),
      ).toMatchObject({ state: 'already', hold: { status: 'rejected' } })
      expect(await claim(T0 + 48 * HOUR)).toEqual([])
      expect((await events()).map((e) => e.type)).toEqual(['message.held', 'message.rejected'])
    })

    it("decides only the account's own holds", async () => {
      const hold = await held()
      const input = { txid: hold.txid, decision: 'approve' as const, by: 'API key 9', now: T0 }
      expect(await f.store.holds.decide({ ...input, accountId: f.otherAccountId })).toBeUndefined()
      expect(await f.store.holds.decide({ ...input, txid: 'unknown' })).toBeUndefined()
      expect((await f.store.holds.get(hold.txid))?.status).toBe('held')
      expect(await claim(T0 + HOUR)).toEqual([])
    })

    it('rejects by expiry: past its time a hold is rejected, whether swept or decided first', async () => {
      const swept = await held({}, { expiresAt: T0 + HOUR })
      const decided = await held({}, { expiresAt: T0 + HOUR })
      const waiting = await held({}, { expiresAt: T0 + 2 * HOUR })
      expect(await f.store.holds.expire(T0 + HOUR - 1)).toBe(0)
      // Deciding one past its expiry finds it rejected by expiry, as of its expiry.
      expect(
        await f.store.holds.decide({ txid: decided.txid, decision: 'approve', by: 'API key 1', now: T0 + HOUR + 5 }),
      ).toMatchObject({ state: 'already', hold: { status: 'rejected', decidedBy: EXPIRY, decidedAt: T0 + HOUR } })
      expect(await f.store.holds.expire(T0 + HOUR + 10)).toBe(1)
      expect(await f.store.holds.get(swept.txid)).toMatchObject({
        status: 'rejected',
        decidedBy: EXPIRY,
        decidedAt: T0 + HOUR,
      })
      expect((await f.store.holds.get(waiting.txid))?.status).toBe('held')
      expect(await f.store.holds.expire(T0 + HOUR + 20)).toBe(0)
      expect(await f.opened.bodyParts()).toBe(1)
      expect(await claim(T0 + 48 * HOUR)).toEqual([])
    })

    it('tells the webhooks of a rejection by expiry, and keeps a sandbox message and its Message-ID', async () => {
      await subscribe()
      const hold = await held(
        { sandbox: true, messageId: '<abc@a.example>', recipients: ['one@b.example'] },
        { expiresAt: T0 + HOUR },
      )
      expect(hold).toMatchObject({ sandbox: true, messageId: '<abc@a.example>', recipients: ['one@b.example'] })
      expect(await f.store.holds.expire(T0 + 2 * HOUR)).toBe(1)
      const told = await events()
      expect(told.map((e) => e.type)).toEqual(['message.held', 'message.rejected'])
      expect(told[1].data).toMatchObject({
        transactionId: hold.txid,
        messageId: '<abc@a.example>',
        decidedBy: EXPIRY,
        expiresAt: new Date(T0 + HOUR).toISOString(),
      })
    })

    it('lists holds newest first, by status and account, a page at a time', async () => {
      const a = await held({ time: T0 })
      const b = await held({ time: T0 + 1000 })
      const c = await held({ time: T0 + 2000 })
      await f.store.holds.create(newMessage({ accountId: f.otherAccountId, orderId: f.otherOrderId }), newHold())
      await f.store.holds.decide({ txid: b.txid, decision: 'reject', by: 'API key 1', now: T0 + 3000 })
      const page = (q: Partial<Parameters<typeof f.store.holds.list>[0]>) =>
        f.store.holds
          .list({ skip: 0, limit: 10, ...q })
          .then(({ total, rows }) => ({ total, txids: rows.map((r) => r.txid) }))
      expect(await page({ accountId: f.accountId })).toEqual({ total: 3, txids: [c.txid, b.txid, a.txid] })
      expect(await page({ accountId: f.accountId, status: 'held' })).toEqual({ total: 2, txids: [c.txid, a.txid] })
      expect(await page({ accountId: f.accountId, status: 'rejected' })).toEqual({ total: 1, txids: [b.txid] })
      expect(await page({ accountId: f.accountId, status: 'approved' })).toEqual({ total: 0, txids: [] })
      expect(await page({ accountId: f.accountId, skip: 1, limit: 1 })).toEqual({ total: 3, txids: [b.txid] })
      expect((await page({})).total).toBe(4)
      expect((await page({ status: 'held' })).total).toBe(3)
    })

    it('takes the answer of the person asked, on any connection, from the account only', async () => {
      const other = await f.another()
      const [approved, rejected, cancelled] = [await held(), await held(), await held()]
      expect(await f.store.holds.asking({ txid: approved.txid, elicitationId: 'mr-el-a' })).toBe(true)
      expect(await f.store.holds.asking({ txid: rejected.txid, elicitationId: 'mr-el-r' })).toBe(true)
      expect(await f.store.holds.asking({ txid: cancelled.txid, elicitationId: 'mr-el-c' })).toBe(true)
      expect(await f.store.holds.get(approved.txid)).toMatchObject({
        elicitationId: 'mr-el-a',
        elicitationState: 'asked',
      })
      const answer = (elicitationId: string, action: 'accept' | 'decline' | 'cancel', accountId = f.accountId) =>
        other.holds.answer({ elicitationId, accountId, action, by: 'the person at the MCP client', now: T0 + 1000 })
      expect(await answer('mr-el-x', 'accept')).toBeUndefined()
      expect(await answer('mr-el-a', 'accept', f.otherAccountId)).toBeUndefined()
      expect(await answer('mr-el-a', 'accept')).toMatchObject({
        status: 'approved',
        decidedBy: 'the person at the MCP client',
        decidedAt: T0 + 1000,
      })
      expect(await answer('mr-el-r', 'decline')).toMatchObject({ status: 'rejected' })
      expect(await answer('mr-el-c', 'cancel')).toMatchObject({ status: 'held', elicitationState: 'cancelled' })
      // The node that asked reads the outcome from the store.
      expect((await f.store.holds.get(approved.txid))?.status).toBe('approved')
      expect((await f.store.holds.get(rejected.txid))?.status).toBe('rejected')
      expect((await f.store.holds.get(cancelled.txid))?.status).toBe('held')
      expect((await claim(T0 + 1000)).map((i) => i.txid)).toEqual([approved.txid, approved.txid])
      // A late answer to a decided hold changes nothing; a decided hold is asked no more.
      expect(await answer('mr-el-a', 'decline')).toMatchObject({ status: 'approved' })
      expect(await f.store.holds.asking({ txid: approved.txid, elicitationId: 'mr-el-a2' })).toBe(false)
      expect(await f.store.holds.asking({ txid: 'unknown', elicitationId: 'mr-el-u' })).toBe(false)
    })

    it('decides a hold once when two connections decide it at the same time', async () => {
      const other = await f.another()
      const holds = [await held(), await held(), await held()]
      const answers = await Promise.all(
        holds.flatMap((h) => [
          f.store.holds.decide({ txid: h.txid, decision: 'approve', by: 'API key 1', now: T0 + 1 }),
          other.holds.decide({ txid: h.txid, decision: 'reject', by: 'the operator', now: T0 + 1 }),
        ]),
      )
      for (const [i, h] of holds.entries()) {
        const pair = answers.slice(2 * i, 2 * i + 2)
        expect(pair.map((a) => a?.state).sort()).toEqual(['already', 'decided'])
        const final = await f.store.holds.get(h.txid)
        expect(pair.map((a) => a?.hold.status)).toEqual([final?.status, final?.status])
      }
    })
  })
}
