import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { loadTls } from '../../relay/tls.js'
import {
  DOORS,
  startHarness,
  type DoorName,
  type Harness,
  type Outcome,
  type SmtpStage,
} from './spam-filter-support.js'

// decisions.md, "Blocks (spam filter) and delisting"; service-api.md 2.12, 4.9, 4.10.
// Every rule is driven through every door a user has (REST, MCP, SMTP submission) and judged by
// what that user sees: the refusal, the delivery log, GET /mail/blocks and POST /mail/blocks/delete.

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0) // the test clock's start (test/helpers.ts)
const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
const TODAY = '2026-11-22'
const DELIST_HINT = 'delist it with POST /mail/blocks/delete'
const NO_BLOCKS = { local: [], mbtrap: [], subject: [], unsubscribed: [] }
const DELISTED = { status: 200, body: { status: 'ok', text: 'record deleted' } }

const SMTP: DoorName = 'SMTP submission'
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

let dataDir: string
let tls: { key: Buffer; cert: Buffer }

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-spam-filter-'))
  tls = await loadTls({ smtp: loadConfig({ MAILROOM_DATA_DIR: dataDir }).smtp, dataDir, nodeName: 'localhost' })
})

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true })
})

let h: Harness
beforeEach(async () => {
  h = await startHarness(tls)
})
afterEach(async () => {
  await h.close()
})

function expectAccepted(outcome: Outcome) {
  expect(outcome, JSON.stringify(outcome)).toMatchObject({ accepted: true })
}

/**
 * A refusal as the door's user sees it: REST a 400 `{code, message}`, MCP an isError result
 * `{code: 400, message}`, SMTP `550 5.7.1 <message>` in reply to the given command.
 */
function expectRefused(door: DoorName, outcome: Outcome, expected: { stage: SmtpStage; message: RegExp }) {
  expect(outcome.accepted, JSON.stringify(outcome)).toBe(false)
  if (outcome.accepted) return
  expect(outcome.message).toMatch(expected.message)
  if (door === SMTP) {
    expect(outcome.reply).toMatch(/^550 5\.7\.1 /)
    expect({ code: outcome.code, stage: outcome.stage }).toEqual({ code: 550, stage: expected.stage })
  } else {
    expect(outcome.code).toBe(400)
  }
}

const senderBlocked = (sender: string, reason: string) =>
  new RegExp(`^from: sender ${esc(sender)} is blocked \\(${esc(reason)}\\); ${esc(DELIST_HINT)}`)
const recipientSuppressed = (rcpt: string) =>
  new RegExp(
    `^to: recipient ${esc(rcpt)} is on this account's local block list \\(an earlier message to it bounced: 550 5\\.1\\.1 user unknown\\); .*${esc(DELIST_HINT)}`,
  )
const trapHit = (rcpt: string, sender: string, field = 'to') =>
  new RegExp(
    `^${field}: recipient ${esc(rcpt)} is a spam trap; the sender ${esc(sender)} is now blocked; ${esc(DELIST_HINT)}`,
  )
const subjectRepeated = (subject: string, sender: string) =>
  new RegExp(
    `^subject: "${esc(subject)}" was sent more than 4 times in 3 days by ${esc(sender)}; the sender is now blocked; ${esc(DELIST_HINT)}`,
  )

/**
 * A `local` or `mbtrap` entry of GET /mail/blocks. An SMTP recipient is refused at RCPT TO,
 * before the message (its Subject and Message-ID) exists, so those entries carry neither.
 */
const blockEntry = (door: DoorName, e: { from: string; to: string; subject: string; date?: string }) => ({
  date: e.date ?? TODAY,
  from: e.from,
  to: e.to,
  subject: door === SMTP ? '' : e.subject,
  messageId: door === SMTP ? null : expect.stringMatching(/^<[^\s<>]+@[^\s<>]+>$/),
})

describe.each(DOORS)('spam filter through %s', (door) => {
  const send = (mail: Parameters<Harness['send']>[1], account?: Parameters<Harness['send']>[2]) =>
    h.send(door, mail, account)

  describe('blocked sender', () => {
    it.each([
      ['internal', 'abuse report #7', 'abuse report #7'],
      ['external', 'imported from feed.txt', 'it is on an imported block list'],
    ] as const)(
      'refuses a sender on the %s list, names why and how to delist, and queues nothing',
      async (source, reason, shown) => {
        await h.blockSender('spammer@example.org', { source, reason })
        const out = await send({ from: 'Spammer@Example.org', to: ['bob@example.net'], subject: 'Hello' })
        expectRefused(door, out, { stage: 'MAIL FROM', message: senderBlocked('Spammer@Example.org', shown) })
        expect(await h.logTotal()).toBe(0)
        // A refusal of a listed sender is not a new spam-filter event.
        expect(await h.blocks()).toEqual(NO_BLOCKS)
        // Only that sender: the account still sends from other addresses.
        expectAccepted(await send({ from: 'alice@example.org', to: ['bob@example.net'], subject: 'Hello' }))
        expect(await h.logTotal()).toBe(1)
      },
    )

    it('is blocked for the whole account: every mail order refuses it', async () => {
      const second = await h.newOrder(h.main)
      await h.blockSender('spammer@example.org')
      const out = await send(
        { from: 'spammer@example.org', to: ['bob@example.net'], subject: 'Hello', orderId: second.orderId },
        second,
      )
      expectRefused(door, out, {
        stage: 'MAIL FROM',
        message: senderBlocked('spammer@example.org', 'blocked by the operator'),
      })
      expect(await h.logTotal(second)).toBe(0)
    })

    it('sends again once delisted, and a new offence (a trap hit) blocks it again', async () => {
      await h.env.services.store.traps.add('trap@example.net', T0)
      await h.blockSender('spammer@example.org')
      const mail = { from: 'spammer@example.org', to: ['bob@example.net'], subject: 'Hello' }
      expectRefused(door, await send(mail), { stage: 'MAIL FROM', message: /is blocked/ })

      expect(await h.delist('Spammer@example.org')).toEqual(DELISTED)
      expectAccepted(await send(mail))
      expect(await h.logTotal()).toBe(1)

      const hit = await send({ ...mail, to: ['trap@example.net'] })
      expectRefused(door, hit, { stage: 'RCPT TO', message: trapHit('trap@example.net', 'spammer@example.org') })
      expectRefused(door, await send(mail), {
        stage: 'MAIL FROM',
        message: senderBlocked('spammer@example.org', 'sent to the spam trap trap@example.net'),
      })
      expect(await h.logTotal()).toBe(1)
      expect((await h.blocks()).mbtrap).toEqual([
        blockEntry(door, { from: 'spammer@example.org', to: 'trap@example.net', subject: 'Hello' }),
      ])
    })
  })

  describe('suppressed recipient (local block list)', () => {
    it('refuses the recipient, records a LOCAL_BL_RCPT event shown under `local`, and does not block the sender', async () => {
      await h.suppress('gone@example.net')
      const out = await send({ from: 'alice@example.org', to: ['Gone@Example.net'], subject: 'Your invoice' })
      expectRefused(door, out, { stage: 'RCPT TO', message: recipientSuppressed('Gone@Example.net') })
      expect(await h.logTotal()).toBe(0)
      expect(await h.blocks()).toEqual({
        local: [blockEntry(door, { from: 'alice@example.org', to: 'Gone@Example.net', subject: 'Your invoice' })],
        mbtrap: [],
        subject: [],
        unsubscribed: [],
      })
      // The sender is not blocked: it still reaches everyone else.
      expectAccepted(await send({ from: 'alice@example.org', to: ['bob@example.net'], subject: 'Your invoice' }))
      expect(await h.logTotal()).toBe(1)
    })

    it('reaches the recipient once it is delisted, and refuses it again when it is suppressed again', async () => {
      await h.suppress('gone@example.net')
      const mail = { from: 'alice@example.org', to: ['gone@example.net'], subject: 'Your invoice' }
      expectRefused(door, await send(mail), { stage: 'RCPT TO', message: recipientSuppressed('gone@example.net') })

      expect(await h.delist('gone@example.net')).toEqual(DELISTED)
      expectAccepted(await send(mail))
      expect(await h.logTotal()).toBe(1)

      // The delisting took the refusal's event with the suppression (decisions: the address goes
      // from all three stores, as a suppressed recipient too).
      expect((await h.blocks()).local).toHaveLength(0)
      // A new bounce puts it back on the list (relay/delivery.ts): refused again, a new event.
      h.env.clock.advance(HOUR)
      await h.suppress('gone@example.net')
      expectRefused(door, await send(mail), { stage: 'RCPT TO', message: recipientSuppressed('gone@example.net') })
      expect(await h.logTotal()).toBe(1)
      const { local } = await h.blocks()
      expect(local).toHaveLength(1)
      expect(local[0]).toEqual(
        blockEntry(door, { from: 'alice@example.org', to: 'gone@example.net', subject: 'Your invoice' }),
      )
    })

    it('delisting the `from` of a `local` entry clears the entry but leaves the recipient suppressed', async () => {
      await h.suppress('gone@example.net')
      const mail = { from: 'alice@example.org', to: ['gone@example.net'], subject: 'Your invoice' }
      await send(mail)
      expect((await h.blocks()).local).toHaveLength(1)
      expect(await h.delist('alice@example.org')).toEqual(DELISTED)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
      expectRefused(door, await send(mail), { stage: 'RCPT TO', message: recipientSuppressed('gone@example.net') })
    })
  })

  describe.each([
    ['an address trap', 'trap@example.net', 'trap@example.net'],
    ['a whole-domain trap', '@trapdomain.test', 'Anyone@TrapDomain.test'],
  ])('spam trap: %s', (_label, pattern, rcpt) => {
    beforeEach(async () => {
      await h.env.services.store.traps.add(pattern, T0)
    })

    it('refuses the recipient, records an MBTRAP event and blocks the sender for every later message', async () => {
      const out = await send({ from: 'alice@example.org', to: [rcpt], subject: 'Quarterly numbers' })
      expectRefused(door, out, { stage: 'RCPT TO', message: trapHit(rcpt, 'alice@example.org') })
      expect(await h.logTotal()).toBe(0)
      expect(await h.blocks()).toEqual({
        local: [],
        mbtrap: [blockEntry(door, { from: 'alice@example.org', to: rcpt, subject: 'Quarterly numbers' })],
        subject: [],
        unsubscribed: [],
      })
      // Blocked: an innocent message to an ordinary recipient is now refused too.
      const next = await send({ from: 'alice@example.org', to: ['bob@example.net'], subject: 'Lunch?' })
      expectRefused(door, next, {
        stage: 'MAIL FROM',
        message: senderBlocked('alice@example.org', `sent to the spam trap ${rcpt}`),
      })
      expect(await h.logTotal()).toBe(0)
      // Only that sender is blocked.
      expectAccepted(await send({ from: 'carol@example.org', to: ['bob@example.net'], subject: 'Lunch?' }))
      expect(await h.logTotal()).toBe(1)
    })

    it('queues nothing when the trap is one of several recipients', async () => {
      const out = await send({ from: 'alice@example.org', to: ['bob@example.net', rcpt], subject: 'Quarterly numbers' })
      if (door === SMTP) {
        // bob was accepted at his RCPT TO; the trap's RCPT TO blocked the sender, so the
        // message is refused at the end of DATA and bob gets nothing either.
        expectRefused(door, out, {
          stage: 'DATA',
          message: senderBlocked('alice@example.org', `sent to the spam trap ${rcpt}`),
        })
      } else {
        expectRefused(door, out, { stage: 'RCPT TO', message: trapHit(rcpt, 'alice@example.org') })
      }
      expect(await h.logTotal()).toBe(0)
      expect((await h.blocks()).mbtrap.map((e) => e.to)).toEqual([rcpt])
    })

    it('sends again once the sender is delisted, and a new trap hit blocks it again', async () => {
      const trapMail = { from: 'alice@example.org', to: [rcpt], subject: 'Quarterly numbers' }
      const ordinary = { from: 'alice@example.org', to: ['bob@example.net'], subject: 'Lunch?' }
      await send(trapMail)
      expectRefused(door, await send(ordinary), { stage: 'MAIL FROM', message: /is blocked/ })

      expect(await h.delist('alice@example.org')).toEqual(DELISTED)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
      expectAccepted(await send(ordinary))
      expect(await h.logTotal()).toBe(1)

      h.env.clock.advance(DAY)
      expectRefused(door, await send(trapMail), { stage: 'RCPT TO', message: trapHit(rcpt, 'alice@example.org') })
      expectRefused(door, await send(ordinary), {
        stage: 'MAIL FROM',
        message: senderBlocked('alice@example.org', `sent to the spam trap ${rcpt}`),
      })
      expect(await h.logTotal()).toBe(1)
      expect((await h.blocks()).mbtrap).toEqual([
        blockEntry(door, { from: 'alice@example.org', to: rcpt, subject: 'Quarterly numbers', date: '2026-11-23' }),
      ])
    })
  })

  describe('repeated spam-indicative subject (more than 4 identical in 3 days)', () => {
    const SPAM = 'Fast SMTP relay for sale'
    const spam = { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM }
    const PAIR = { from: 'alice@example.org', subject: SPAM }

    it('accepts the 5th (4 already sent), refuses the 6th (5 already sent) and then blocks the sender', async () => {
      for (let i = 1; i <= 4; i++) expectAccepted(await send(spam))
      expect((await h.blocks()).subject).toEqual([]) // 4 is not more than 4
      expectAccepted(await send(spam))
      expect(await h.logTotal()).toBe(5)
      expect(await h.blocks()).toEqual({ local: [], mbtrap: [], subject: [PAIR], unsubscribed: [] })

      expectRefused(door, await send(spam), { stage: 'DATA', message: subjectRepeated(SPAM, 'alice@example.org') })
      expect(await h.logTotal()).toBe(5)
      // The sender is blocked now: even an innocent subject is refused.
      expectRefused(door, await send({ ...spam, subject: 'Lunch on Friday?' }), {
        stage: 'MAIL FROM',
        message: senderBlocked('alice@example.org', `repeated the subject "${SPAM}"`),
      })
      expect(await h.logTotal()).toBe(5)
      // The count is per sender: another sender of the account may still use the subject.
      expectAccepted(await send({ ...spam, from: 'carol@example.org' }))
      expect(await h.logTotal()).toBe(6)
      expect((await h.blocks()).subject).toEqual([PAIR])
    })

    it('sends again once delisted (the count starts over), and a new run of the subject blocks it again', async () => {
      for (let i = 1; i <= 5; i++) expectAccepted(await send(spam))
      expectRefused(door, await send(spam), { stage: 'DATA', message: subjectRepeated(SPAM, 'alice@example.org') })

      expect(await h.delist('alice@example.org')).toEqual(DELISTED)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
      for (let i = 1; i <= 5; i++) expectAccepted(await send(spam))
      expect(await h.logTotal()).toBe(10)
      expectRefused(door, await send(spam), { stage: 'DATA', message: subjectRepeated(SPAM, 'alice@example.org') })
      expectRefused(door, await send({ ...spam, subject: 'Hello' }), { stage: 'MAIL FROM', message: /is blocked/ })
      expect(await h.logTotal()).toBe(10)
    })

    it('never refuses a subject that is not spam-indicative, however often it repeats', async () => {
      for (let i = 1; i <= 7; i++) expectAccepted(await send({ ...spam, subject: 'Weekly newsletter' }))
      expect(await h.logTotal()).toBe(7)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
    })

    it.each([
      { label: '3 days less a minute', age: 3 * DAY - MINUTE, accepted: false, outcome: 'refused' },
      { label: '3 days and a minute', age: 3 * DAY + MINUTE, accepted: true, outcome: 'accepted' },
    ])('with 5 sent $label ago, the next is $outcome', async ({ age, accepted }) => {
      for (let i = 1; i <= 5; i++) expectAccepted(await send(spam))
      h.env.clock.advance(age)
      const out = await send(spam)
      if (accepted) {
        expectAccepted(out)
        expect(await h.logTotal()).toBe(6)
        expect((await h.blocks()).subject).toEqual([])
      } else {
        expectRefused(door, out, { stage: 'DATA', message: subjectRepeated(SPAM, 'alice@example.org') })
        expect(await h.logTotal()).toBe(5)
        expect((await h.blocks()).subject).toEqual([PAIR])
      }
    })
  })

  describe('isolation between accounts', () => {
    it("another account's blocks, suppressions and subject counts neither refuse this account's sends nor show in its GET /mail/blocks", async () => {
      const b = await h.newAccount()
      const SPAM = 'socks5 proxies cheap'
      // Account B: alice repeats a spam subject until blocked; gone@ is suppressed and hit.
      for (let i = 1; i <= 5; i++)
        expectAccepted(
          await h.send(
            'REST POST /mail/send',
            { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM },
            b,
          ),
        )
      expect(
        (await h.send('REST POST /mail/send', { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM }, b))
          .accepted,
      ).toBe(false)
      await h.suppress('gone@example.net', b)
      await h.send('REST POST /mail/send', { from: 'carol@example.org', to: ['gone@example.net'], subject: 'hi' }, b)
      await h.blockSender('dave@example.org', { account: b, source: 'external' })

      // Account A: the same addresses are fine.
      expectAccepted(await send({ from: 'alice@example.org', to: ['gone@example.net'], subject: SPAM }))
      expectAccepted(await send({ from: 'dave@example.org', to: ['bob@example.net'], subject: 'hi' }))
      expect(await h.logTotal()).toBe(2)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
      const theirs = await h.blocks(b)
      expect(theirs.subject).toEqual([{ from: 'alice@example.org', subject: SPAM }])
      expect(theirs.local.map((e) => e.to)).toEqual(['gone@example.net'])
    })

    it('a trap hit blocks the sender only in the account that hit it (traps themselves are operator-wide)', async () => {
      const b = await h.newAccount()
      await h.env.services.store.traps.add('trap@example.net', T0)
      expectRefused(door, await send({ from: 'alice@example.org', to: ['trap@example.net'], subject: 'x' }), {
        stage: 'RCPT TO',
        message: trapHit('trap@example.net', 'alice@example.org'),
      })

      expectAccepted(
        await h.send('REST POST /mail/send', { from: 'alice@example.org', to: ['bob@example.net'], subject: 'x' }, b),
      )
      expect(await h.blocks(b)).toEqual(NO_BLOCKS)
      // The trap catches B too, and then B's alice is blocked as well.
      const hitB = await h.send(
        'REST POST /mail/send',
        { from: 'alice@example.org', to: ['trap@example.net'], subject: 'y' },
        b,
      )
      expectRefused('REST POST /mail/send', hitB, {
        stage: 'RCPT TO',
        message: trapHit('trap@example.net', 'alice@example.org'),
      })
      expect((await h.blocks(b)).mbtrap.map((e) => e.subject)).toEqual(['y'])
      expect((await h.blocks()).mbtrap).toHaveLength(1)
    })

    it("delisting in one account leaves the other account's entries and blocks in place", async () => {
      const b = await h.newAccount()
      await h.env.services.store.traps.add('trap@example.net', T0)
      await send({ from: 'alice@example.org', to: ['trap@example.net'], subject: 'x' })
      await h.send('REST POST /mail/send', { from: 'alice@example.org', to: ['trap@example.net'], subject: 'x' }, b)
      await h.blockSender('mallory@example.org', { account: b })

      expect(await h.delist('alice@example.org')).toEqual(DELISTED)
      expectAccepted(await send({ from: 'alice@example.org', to: ['bob@example.net'], subject: 'x' }))
      // B: still blocked, its event still listed.
      const stillB = await h.send(
        'REST POST /mail/send',
        { from: 'alice@example.org', to: ['bob@example.net'], subject: 'x' },
        b,
      )
      expectRefused('REST POST /mail/send', stillB, {
        stage: 'MAIL FROM',
        message: senderBlocked('alice@example.org', 'sent to the spam trap trap@example.net'),
      })
      expect((await h.blocks(b)).mbtrap).toHaveLength(1)
      expect(await h.logTotal(b)).toBe(0)

      // An address only B blocks is not A's to delist.
      expect(await h.delist('mallory@example.org')).toEqual({
        status: 404,
        body: { code: 404, message: expect.stringMatching(/^email: mallory@example\.org is not on any block list/) },
      })
      expectRefused(
        'REST POST /mail/send',
        await h.send('REST POST /mail/send', { from: 'mallory@example.org', to: ['bob@example.net'], subject: 'x' }, b),
        {
          stage: 'MAIL FROM',
          message: /is blocked/,
        },
      )
    })
  })
})

describe('spam-indicative subjects', () => {
  const REST: DoorName = 'REST POST /mail/send'
  const sendSubject = (subject: string, from = 'alice@example.org') =>
    h.send(REST, { from, to: ['bob@example.net'], subject })

  it.each([
    'contact me@example.org',
    '@',
    'smtp',
    'Cheap SMTP accounts',
    'ESMTP relay',
    'sOcKs4 proxies',
    'SOCKS5 list',
    'fresh socks5',
  ])('%j is spam-indicative: 5 are accepted, the 6th is refused', async (subject) => {
    for (let i = 1; i <= 5; i++) expectAccepted(await sendSubject(subject))
    expectRefused(REST, await sendSubject(subject), {
      stage: 'DATA',
      message: subjectRepeated(subject, 'alice@example.org'),
    })
    expect(await h.logTotal()).toBe(5)
    expect((await h.blocks()).subject).toEqual([{ from: 'alice@example.org', subject }])
  })

  it.each(['socks', 'socks 5', 'sock4', 's-m-t-p', 'meet at noon', 'Weekly report'])(
    '%j is not spam-indicative: never counted nor refused',
    async (subject) => {
      for (let i = 1; i <= 6; i++) expectAccepted(await sendSubject(subject))
      expect(await h.logTotal()).toBe(6)
      expect(await h.blocks()).toEqual(NO_BLOCKS)
    },
  )

  it('counts identical subjects only: 4 of one and 4 of another are all accepted', async () => {
    for (let i = 1; i <= 4; i++) expectAccepted(await sendSubject('smtp offer A'))
    for (let i = 1; i <= 4; i++) expectAccepted(await sendSubject('smtp offer B'))
    expect(await h.logTotal()).toBe(8)
    expect(await h.blocks()).toEqual(NO_BLOCKS)
  })

  it('counts the same subject across all doors, an RFC 2047-encoded SMTP Subject included', async () => {
    const SPAM = 'Fast SMTP relay for sale'
    const mail = { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM }
    expectAccepted(await h.send(REST, mail))
    expectAccepted(await h.send(REST, mail))
    expectAccepted(await h.send('MCP sendMail', mail))
    expectAccepted(await h.send('MCP sendAdvMail', mail))
    expectAccepted(
      await h.send(SMTP, { ...mail, rawSubjectHeader: `Subject: =?UTF-8?B?${Buffer.from(SPAM).toString('base64')}?=` }),
    )
    expect((await h.blocks()).subject).toEqual([{ from: 'alice@example.org', subject: SPAM }])
    expectRefused(SMTP, await h.send(SMTP, mail), {
      stage: 'DATA',
      message: subjectRepeated(SPAM, 'alice@example.org'),
    })
    expect(await h.logTotal()).toBe(5)
  })

  it('the 3-day window rolls: subjects that age out stop counting, newer ones still count', async () => {
    const SPAM = 'socks4 list'
    for (let i = 1; i <= 3; i++) expectAccepted(await sendSubject(SPAM))
    h.env.clock.advance(2 * DAY)
    for (let i = 1; i <= 2; i++) expectAccepted(await sendSubject(SPAM))
    expect((await h.blocks()).subject).toEqual([{ from: 'alice@example.org', subject: SPAM }])

    h.env.clock.advance(DAY + MINUTE) // the first 3 are now older than 3 days
    expect((await h.blocks()).subject).toEqual([])
    for (let i = 1; i <= 3; i++) expectAccepted(await sendSubject(SPAM)) // 2 + 3 = 5
    expectRefused(REST, await sendSubject(SPAM), { stage: 'DATA', message: subjectRepeated(SPAM, 'alice@example.org') })
    expect(await h.logTotal()).toBe(8)
  })

  it.each(DOORS)(
    'holds under concurrency (%s): of 10 identical spam subjects sent at once, exactly 5 are accepted',
    async (door) => {
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, () =>
          h.send(door, { from: 'alice@example.org', to: ['bob@example.net'], subject: 'smtp relay for sale' }),
        ),
      )
      const accepted = outcomes.filter((o) => o.accepted).length
      for (const o of outcomes)
        if (!o.accepted)
          expectRefused(door, o, { stage: o.stage ?? 'DATA', message: /sent more than 4 times|is blocked/ })
      expect(await h.logTotal()).toBe(accepted)
      expect(accepted).toBe(5)
    },
  )
})

describe('spam trap in Bcc', () => {
  it('sendAdvMail with a trap only in bcc is refused, queues nothing and blocks the sender', async () => {
    await h.env.services.store.traps.add('trap@example.net', T0)
    const out = await h.send('MCP sendAdvMail', {
      from: 'alice@example.org',
      to: ['bob@example.net'],
      bcc: ['trap@example.net'],
      subject: 'Minutes',
    })
    expectRefused('MCP sendAdvMail', out, {
      stage: 'RCPT TO',
      message: trapHit('trap@example.net', 'alice@example.org', 'bcc'),
    })
    expect(await h.logTotal()).toBe(0)
    expect((await h.blocks()).mbtrap).toEqual([
      blockEntry('MCP sendAdvMail', { from: 'alice@example.org', to: 'trap@example.net', subject: 'Minutes' }),
    ])
    expect(
      (await h.send('MCP sendAdvMail', { from: 'alice@example.org', to: ['bob@example.net'], subject: 'Minutes' }))
        .accepted,
    ).toBe(false)
  })
})

describe('store.blocks.prune', () => {
  const REST: DoorName = 'REST POST /mail/send'

  it('deletes only events older than `before`, in every account, and says how many', async () => {
    const { store, clock } = h.env.services
    const b = await h.newAccount()
    await store.traps.add('trap@example.net', T0)
    await h.suppress('gone@example.net')
    // At T0: an MBTRAP event in each account.
    await h.send(REST, { from: 'old@example.org', to: ['trap@example.net'], subject: 'old' })
    await h.send(REST, { from: 'old@example.org', to: ['trap@example.net'], subject: 'old' }, b)
    // A day later: a LOCAL_BL_RCPT event in A.
    h.env.clock.advance(DAY)
    await h.send(REST, { from: 'new@example.org', to: ['gone@example.net'], subject: 'new' })
    const boundary = clock()
    expect((await h.blocks()).mbtrap).toHaveLength(1)

    expect(await store.blocks.prune(boundary)).toBe(2)
    expect(await h.blocks()).toEqual({
      local: [expect.objectContaining({ from: 'new@example.org', to: 'gone@example.net' })],
      mbtrap: [],
      subject: [],
      unsubscribed: [],
    })
    expect(await h.blocks(b)).toEqual(NO_BLOCKS)
    // An event exactly at `before` is not older than it.
    expect(await store.blocks.prune(boundary)).toBe(0)
    expect(await store.blocks.prune(boundary + 1)).toBe(1)
    expect(await h.blocks()).toEqual(NO_BLOCKS)
  })

  it('pruned subject events no longer count toward the threshold', async () => {
    const SPAM = 'smtp relay for sale'
    for (let i = 1; i <= 5; i++)
      expectAccepted(await h.send(REST, { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM }))
    h.env.clock.advance(HOUR)
    expect(await h.env.services.store.blocks.prune(h.env.clock() - MINUTE)).toBe(5)
    expect((await h.blocks()).subject).toEqual([])
    expectAccepted(await h.send(REST, { from: 'alice@example.org', to: ['bob@example.net'], subject: SPAM }))
    expect(await h.logTotal()).toBe(6)
  })

  it('prunes events only: a sender blocked by a trap hit stays blocked until delisted', async () => {
    await h.env.services.store.traps.add('trap@example.net', T0)
    await h.send(REST, { from: 'alice@example.org', to: ['trap@example.net'], subject: 'x' })
    h.env.clock.advance(HOUR)
    expect(await h.env.services.store.blocks.prune(h.env.clock())).toBe(1)
    expect(await h.blocks()).toEqual(NO_BLOCKS)
    const mail = { from: 'alice@example.org', to: ['bob@example.net'], subject: 'x' }
    expectRefused(REST, await h.send(REST, mail), {
      stage: 'MAIL FROM',
      message: senderBlocked('alice@example.org', 'sent to the spam trap trap@example.net'),
    })
    expect(await h.delist('alice@example.org')).toEqual(DELISTED)
    expectAccepted(await h.send(REST, mail))
  })
})
