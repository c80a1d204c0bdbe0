import { describe, expect, it } from 'vitest'
import { type Fixture, LEASE_MS, T0 } from './fixture.js'

export function rulesContract(f: Fixture) {
  describe('deny rules', () => {
    it('creates a rule once, its value lowercased, and lists the rules of the orders asked', async () => {
      const rule = await f.store.rules.create({ orderId: f.orderId, type: 'domain', data: 'Spam.Example', now: T0 })
      expect(rule).toMatchObject({ orderId: f.orderId, type: 'domain', data: 'spam.example', createdAt: T0 })
      // The same rule again, in any case, is the one there.
      expect(
        await f.store.rules.create({ orderId: f.orderId, type: 'domain', data: 'SPAM.example', now: T0 + 1 }),
      ).toEqual(rule)
      const email = await f.store.rules.create({ orderId: f.orderId, type: 'email', data: 'spam.example', now: T0 })
      const theirs = await f.store.rules.create({
        orderId: f.otherOrderId,
        type: 'startswith',
        data: 'news',
        now: T0,
      })
      expect(await f.store.rules.list([f.orderId])).toEqual([rule, email])
      expect(await f.store.rules.list([f.otherOrderId])).toEqual([theirs])
      expect(await f.store.rules.list([f.orderId, f.otherOrderId])).toEqual([rule, email, theirs])
      expect(await f.store.rules.list([])).toEqual([])
    })

    it('deletes a rule only for the orders it belongs to', async () => {
      const rule = await f.store.rules.create({ orderId: f.orderId, type: 'destination', data: 'x.example', now: T0 })
      expect(await f.store.rules.delete(rule.id, [f.otherOrderId])).toBe(false)
      expect(await f.store.rules.delete(rule.id, [])).toBe(false)
      expect(await f.store.rules.list([f.orderId])).toEqual([rule])
      expect(await f.store.rules.delete(rule.id, [f.otherOrderId, f.orderId])).toBe(true)
      expect(await f.store.rules.delete(rule.id, [f.orderId])).toBe(false)
      expect(await f.store.rules.list([f.orderId])).toEqual([])
    })
  })
}

export function blocksContract(f: Fixture) {
  describe('block lists', () => {
    const add = (kind: 'sender' | 'recipient', address: string, source: 'external' | 'internal' = 'internal') =>
      f.store.blocks.addToList({ accountId: f.accountId, source, kind, address, reason: `${kind} ${address}`, now: T0 })

    it('adds an entry once, and writes its events to the outbox in the same commit, only when new', async () => {
      await f.store.webhooks.create({
        accountId: f.accountId,
        url: 'https://hooks.example/in',
        events: ['recipient.unsubscribed'],
        description: null,
        secret: 'whsec_c2VjcmV0',
        now: T0,
      })
      const unsubscribed = (id: string) => ({
        accountId: f.accountId,
        source: 'internal' as const,
        kind: 'recipient' as const,
        address: 'Left@B.example',
        reason: 'unsubscribed',
        now: T0,
        txid: 'tx1',
        events: [
          {
            id,
            type: 'recipient.unsubscribed' as const,
            accountId: f.accountId,
            time: T0,
            data: { recipient: 'left@b.example', transactionId: 'tx1', via: 'one-click' },
          },
        ],
      })
      expect(await f.store.blocks.addToList(unsubscribed('msg_first'))).toBe(true)
      expect(await f.store.blocks.addToList(unsubscribed('msg_second'))).toBe(false)
      const claimed = await f.store.webhooks.claim({ node: 'node-a', now: T0, leaseMs: LEASE_MS, limit: 100 })
      expect(claimed.map((c) => [c.eventId, c.type, JSON.parse(c.payload).data])).toEqual([
        [
          'msg_first',
          'recipient.unsubscribed',
          { recipient: 'left@b.example', transactionId: 'tx1', via: 'one-click' },
        ],
      ])
      expect(await f.store.blocks.suppressedFor(f.accountId, 'unsubscribed', T0, 10)).toEqual([
        { address: 'left@b.example', reason: 'unsubscribed', createdAt: T0, txid: 'tx1' },
      ])
      expect(await f.store.blocks.suppressedFor(f.accountId, 'unsubscribed', T0 + 1, 10)).toEqual([])
      expect(await f.store.blocks.suppressedFor(f.otherAccountId, 'unsubscribed', T0, 10)).toEqual([])
    })

    it('seals unsubscribe tokens that another connection opens, and opens none it did not seal', async () => {
      const link = { accountId: f.accountId, txid: 'a1b2c3d4e5f6a7b8c9', address: 'Ann@B.example' }
      const token = f.store.blocks.unsubscribeToken(link)
      expect(token).toMatch(/^[\w-]+$/)
      expect(f.store.blocks.unsubscribeToken(link)).not.toBe(token) // a fresh IV each time
      expect((await f.another()).blocks.openUnsubscribeToken(token)).toEqual(link)
      const flipped = `${token.slice(0, 20)}${token[20] === 'A' ? 'B' : 'A'}${token.slice(21)}`
      for (const bad of [flipped, token.slice(0, -1), '', 'x'.repeat(80), `${token}A`])
        expect(f.store.blocks.openUnsubscribeToken(bad)).toBeUndefined()
    })

    it('answers for an address in any case, of the account and the kind it was listed for', async () => {
      await add('sender', 'Spam@A.example', 'external')
      await add('recipient', 'Gone@B.example')
      const sender = { source: 'external', kind: 'sender', address: 'spam@a.example', reason: 'sender Spam@A.example' }
      expect(await f.store.blocks.blockedSender(f.accountId, 'SPAM@a.EXAMPLE')).toMatchObject(sender)
      expect(await f.store.blocks.suppressed(f.accountId, 'gone@b.example')).toMatchObject({
        kind: 'recipient',
        address: 'gone@b.example',
      })
      expect(await f.store.blocks.suppressed(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.blockedSender(f.accountId, 'gone@b.example')).toBeUndefined()
      expect(await f.store.blocks.blockedSender(f.otherAccountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.suppressed(f.otherAccountId, 'gone@b.example')).toBeUndefined()
    })

    it('lists the entries of a kind by address, and removes one', async () => {
      await add('recipient', 'b@b.example')
      await add('recipient', 'a@b.example', 'external')
      await add('recipient', 'a@b.example')
      await add('sender', 'c@b.example')
      const listed = async () =>
        (await f.store.blocks.listEntries(f.accountId, 'recipient')).map((e) => [e.address, e.source])
      expect((await listed()).sort()).toEqual([
        ['a@b.example', 'external'],
        ['a@b.example', 'internal'],
        ['b@b.example', 'internal'],
      ])
      expect((await listed()).map(([address]) => address)).toEqual(['a@b.example', 'a@b.example', 'b@b.example'])
      expect(await f.store.blocks.listEntries(f.otherAccountId, 'recipient')).toEqual([])
      expect(await f.store.blocks.removeFromList(f.accountId, 'B@b.example', 'sender')).toBe(false)
      expect(await f.store.blocks.removeFromList(f.accountId, 'B@b.example', 'recipient')).toBe(true)
      expect(await f.store.blocks.removeFromList(f.accountId, 'b@b.example', 'recipient')).toBe(false)
      expect(await f.store.blocks.suppressed(f.accountId, 'b@b.example')).toBeUndefined()
    })

    it('pages the suppressed recipients of an account, newest first, with the message that caused each', async () => {
      const suppress = (address: string, at: number, txid?: string, accountId = f.accountId) =>
        f.store.blocks.addToList({
          accountId,
          source: 'internal',
          kind: 'recipient',
          address,
          reason: `why ${address}`,
          now: at,
          txid,
        })
      await suppress('Old@B.example', T0, 'aaaaaaaaaaaaaaaaaa')
      await suppress('operator@b.example', T0 + 2)
      await suppress('new@b.example', T0 + 3, 'bbbbbbbbbbbbbbbbbb')
      await suppress('same@b.example', T0 + 3, 'cccccccccccccccccc')
      // Listed again (another bounce): the first cause stays.
      await suppress('old@b.example', T0 + 4, 'dddddddddddddddddd')
      await add('sender', 'sender@b.example')
      await suppress('theirs@b.example', T0 + 5, 'eeeeeeeeeeeeeeeeee', f.otherAccountId)
      const all = await f.store.blocks.suppressions(f.accountId, { skip: 0, limit: 10 })
      expect(all).toEqual({
        total: 4,
        rows: [
          { address: 'new@b.example', reason: 'why new@b.example', createdAt: T0 + 3, txid: 'bbbbbbbbbbbbbbbbbb' },
          { address: 'same@b.example', reason: 'why same@b.example', createdAt: T0 + 3, txid: 'cccccccccccccccccc' },
          { address: 'operator@b.example', reason: 'why operator@b.example', createdAt: T0 + 2, txid: null },
          { address: 'old@b.example', reason: 'why Old@B.example', createdAt: T0, txid: 'aaaaaaaaaaaaaaaaaa' },
        ],
      })
      expect(await f.store.blocks.suppressions(f.accountId, { skip: 1, limit: 2 })).toEqual({
        total: 4,
        rows: all.rows.slice(1, 3),
      })
      expect(await f.store.blocks.suppressions(f.accountId, { skip: 4, limit: 2 })).toEqual({ total: 4, rows: [] })
      expect(await f.store.blocks.suppressions(f.otherAccountId, { skip: 0, limit: 10 })).toEqual({
        total: 1,
        rows: [expect.objectContaining({ address: 'theirs@b.example', txid: 'eeeeeeeeeeeeeeeeee' })],
      })
      await f.store.blocks.delist(f.accountId, 'new@b.example')
      expect((await f.store.blocks.suppressions(f.accountId, { skip: 0, limit: 10 })).total).toBe(3)
    })

    it("delists an address from the account's lists and events, and counts what went", async () => {
      await add('sender', 'spam@a.example')
      await add('recipient', 'spam@a.example')
      const event = { envFrom: 'Spam@a.example', messageId: null, subject: 'x', rcptTo: 'r@b.example' }
      await f.store.blocks.addEvent(f.accountId, { ...event, rule: 'MBTRAP', createdAt: T0 })
      await f.store.blocks.addEvent(f.otherAccountId, { ...event, rule: 'MBTRAP', createdAt: T0 })
      expect(await f.store.blocks.delist(f.accountId, 'SPAM@a.example')).toBe(3)
      expect(await f.store.blocks.blockedSender(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.suppressed(f.accountId, 'spam@a.example')).toBeUndefined()
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', 0)).toEqual([])
      expect(await f.store.blocks.events(f.otherAccountId, 'MBTRAP', 0)).toHaveLength(1)
      expect(await f.store.blocks.delist(f.accountId, 'spam@a.example')).toBe(0)
    })

    it("delists a suppressed recipient with the events of mail refused to it, and no other account's", async () => {
      await add('recipient', 'gone@b.example')
      const refused = { envFrom: 'me@a.example', messageId: null, subject: '', rcptTo: 'Gone@b.example' }
      const other = { ...refused, rcptTo: 'here@b.example' }
      for (const [account, event] of [
        [f.accountId, refused],
        [f.accountId, other],
        [f.otherAccountId, refused],
      ] as const)
        await f.store.blocks.addEvent(account, { ...event, rule: 'LOCAL_BL_RCPT', createdAt: T0 })
      // A trap event that names it as a recipient is the sender's offence, not its own: it stays.
      await f.store.blocks.addEvent(f.accountId, { ...refused, rule: 'MBTRAP', createdAt: T0 })
      expect(await f.store.blocks.delist(f.accountId, 'gone@B.example')).toBe(2)
      expect(await f.store.blocks.suppressed(f.accountId, 'gone@b.example')).toBeUndefined()
      expect((await f.store.blocks.events(f.accountId, 'LOCAL_BL_RCPT', 0)).map((e) => e.rcptTo)).toEqual([
        'here@b.example',
      ])
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', 0)).toHaveLength(1)
      expect(await f.store.blocks.events(f.otherAccountId, 'LOCAL_BL_RCPT', 0)).toHaveLength(1)
    })

    it('keeps spam-filter events of an account and a rule, newest first, and prunes the old', async () => {
      const event = (rule: 'MBTRAP' | 'LOCAL_BL_RCPT', createdAt: number) => ({
        rule,
        createdAt,
        envFrom: 'from@a.example',
        messageId: `<${createdAt}@a.example>`,
        subject: 'subject',
        rcptTo: 'to@b.example',
      })
      for (const e of [event('MBTRAP', T0), event('MBTRAP', T0 + 2000), event('LOCAL_BL_RCPT', T0 + 1000)])
        await f.store.blocks.addEvent(f.accountId, e)
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', T0)).toEqual([
        event('MBTRAP', T0 + 2000),
        event('MBTRAP', T0),
      ])
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', T0 + 1)).toEqual([event('MBTRAP', T0 + 2000)])
      expect(await f.store.blocks.events(f.otherAccountId, 'MBTRAP', 0)).toEqual([])
      expect(await f.store.blocks.prune(T0 + 1000)).toBe(1)
      expect(await f.store.blocks.events(f.accountId, 'MBTRAP', 0)).toEqual([event('MBTRAP', T0 + 2000)])
      expect(await f.store.blocks.events(f.accountId, 'LOCAL_BL_RCPT', 0)).toEqual([event('LOCAL_BL_RCPT', T0 + 1000)])
    })
  })
}

export function trapsContract(f: Fixture) {
  describe('traps', () => {
    it('catches an address itself or anyone at a trapped domain, in any case', async () => {
      expect(await f.store.traps.add('Trap@A.example', T0)).toBe(true)
      expect(await f.store.traps.add('trap@a.example', T0)).toBe(false)
      expect(await f.store.traps.add('@Spam.example', T0)).toBe(true)
      expect(await f.store.traps.list()).toEqual(['@spam.example', 'trap@a.example'])
      for (const [address, trap] of [
        ['TRAP@a.example', 'trap@a.example'],
        ['other@a.example', undefined],
        ['anyone@SPAM.example', '@spam.example'],
        ['anyone@sub.spam.example', undefined],
      ] as const)
        expect(await f.store.traps.match(address)).toBe(trap)
      expect(await f.store.traps.remove('TRAP@a.example')).toBe(true)
      expect(await f.store.traps.remove('trap@a.example')).toBe(false)
      expect(await f.store.traps.match('trap@a.example')).toBeUndefined()
      expect(await f.store.traps.list()).toEqual(['@spam.example'])
    })
  })
}

export function spamFilterContract(f: Fixture) {
  describe('spam-filter subject counts', () => {
    const THRESHOLD = 2
    const take = (envFrom: string, subject = 'FREE MONEY', createdAt = T0, since = T0 - 1000, store = f.store) =>
      store.blocks.takeSubject(
        f.accountId,
        { envFrom, subject, createdAt, messageId: null, rcptTo: 'r@b.example' },
        since,
        THRESHOLD,
      )

    it('lets a sender send a subject as many times as the threshold allows, in any case of its address', async () => {
      const answers = []
      for (const from of ['s@a.example', 'S@a.example', 's@A.EXAMPLE', 's@a.example']) answers.push(await take(from))
      expect(answers).toEqual([true, true, true, false])
      // Reported once past the threshold: the sender has sent it THRESHOLD + 1 times.
      expect(await f.store.blocks.subjectPairs(f.accountId, T0 - 1000, THRESHOLD)).toEqual([
        { from: 's@a.example', subject: 'FREE MONEY' },
      ])
      expect(await f.store.blocks.subjectPairs(f.accountId, T0 - 1000, THRESHOLD + 1)).toEqual([])
      // Another subject, another sender, another account, or events before the window: counted apart.
      expect(await take('s@a.example', 'free money')).toBe(true)
      expect(await take('t@a.example')).toBe(true)
      expect(await take('s@a.example', 'FREE MONEY', T0 + 60_000, T0 + 1)).toBe(true)
      expect(
        await f.store.blocks.takeSubject(
          f.otherAccountId,
          { envFrom: 's@a.example', subject: 'FREE MONEY', createdAt: T0, messageId: null, rcptTo: 'r@b.example' },
          0,
          THRESHOLD,
        ),
      ).toBe(true)
    })

    it('counts concurrent sends through two connections as one', async () => {
      const other = await f.another()
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => take('s@a.example', 'FREE MONEY', T0, T0 - 1000, i % 2 ? other : f.store)),
      )
      expect(answers.filter(Boolean)).toHaveLength(THRESHOLD + 1)
      expect(await f.store.blocks.events(f.accountId, 'SUBJECT', 0)).toHaveLength(THRESHOLD + 1)
    })
  })
}
