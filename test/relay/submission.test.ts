import type Database from 'better-sqlite3'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { SMTPServer } from 'smtp-server'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { loadConfig } from '../../config.js'
import { AUTH_FAILURE_WINDOW_MS, authClient } from '../../relay/auth-throttle.js'
import { createSubmissionServer, submissionLimits } from '../../relay/submission.js'
import { loadTls } from '../../relay/tls.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { blockRecipients, ESCAPED_RECIPIENTS } from '../tools/support.js'
import { RawSmtp, SmtpClient, refusal } from './submission-client.js'

const QUEUED = /^250 Message queued as ([0-9a-f]{18})$/
const MINUTE = 60_000
const execFileAsync = promisify(execFile)

/** A message with CRLF line ends, as it travels; the dot line checks dot-stuffing both ways. */
/** A message after DATA as a client writes it: CRLF lines, then the terminating dot. */
const dataOf = (text: string) => Buffer.from(`${text.replace(/\r?\n/g, '\r\n')}\r\n.\r\n`)
const message = (headerFrom = 'alice@example.org', to = 'bob@example.net', body = 'Hello Bob.') =>
  [
    `From: Alice <${headerFrom}>`,
    `To: ${to}`,
    'Subject: hello there',
    'Message-ID: <m1.submission@example.org>',
    'Date: Sun, 22 Nov 2026 11:59:00 +0000',
    '',
    body,
    '.a line that starts with a dot',
    'the end',
    '',
  ].join('\r\n')

let dataDir: string
let tls: { key: Buffer; cert: Buffer }
let env: TestEnv | undefined
let server: SMTPServer | undefined
const clients: { close(): void }[] = []
/** More to close after each test (a second server). */
const after: (() => Promise<void>)[] = []

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-submission-'))
  tls = await loadTls({ smtp: loadConfig({ MAILROOM_DATA_DIR: dataDir }).smtp, dataDir, nodeName: 'localhost' })
})

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true })
})

afterEach(async () => {
  for (const c of clients.splice(0)) c.close()
  for (const close of after.splice(0)) await close()
  if (server) {
    const s = server
    await new Promise<void>((resolve) => s.close(() => resolve()))
  }
  server = undefined
  await env?.close()
  env = undefined
})

/** A test env and its submission server on 127.0.0.1, an ephemeral port. */
async function start(overrides: Record<string, string> = {}) {
  const e = (env = await createTestEnv(overrides))
  const { store, relay, config, logger, clock, budget } = e.services
  const limits = submissionLimits(config)
  const s = (server = createSubmissionServer({ store, relay, config, logger, clock, budget, tls, limits }))
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()))
  const port = (s.server.address() as AddressInfo).port
  const sqlite = (store as unknown as { sqlite: Database.Database }).sqlite
  const count = (table: string) => (sqlite.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n
  return {
    env: e,
    port,
    limits,
    /** Message bytes held in memory now, by every door. */
    held: () => e.services.budget.held().total,
    user: `mb${e.orderId}`,
    password: await store.orders.password(e.orderId),
    /** A nodemailer SMTPConnection, connected (STARTTLS done unless tls: false). */
    async client(options: { tls?: boolean } = {}) {
      const c = await SmtpClient.open(port, options)
      clients.push(c)
      return c
    },
    async raw() {
      const c = await this.open()
      expect(await c.greeting).toMatch(/^220 /)
      return c
    },
    /** A line-level client, its greeting not yet checked; `from`: the local address to connect from. */
    async open(from?: string) {
      const c = await RawSmtp.open(port, '127.0.0.1', from)
      clients.push(c)
      return c
    },
    /** A line-level client after EHLO `name` (client.example), STARTTLS and EHLO again (`ehlo`: the reply to that one); logged in as the order unless `auth` is false. */
    async rawSession(options: { auth?: boolean; name?: string } = {}) {
      const c = await this.raw()
      const name = options.name ?? 'client.example'
      await c.cmd(`EHLO ${name}`)
      expect(await c.starttls()).toMatch(/^220 /)
      const ehlo = await c.cmd(`EHLO ${name}`)
      if (options.auth ?? true)
        expect(await c.authPlain(`mb${e.orderId}`, await store.orders.password(e.orderId))).toMatch(/^235 /)
      return { raw: c, ehlo }
    },
    /** Delivery-log rows of an order, one per recipient, in seq order. */
    async log(orderId = e.orderId) {
      const { rows } = await store.mail.log({ orderId, skip: 0, limit: 100, dir: 'desc', groupby: 'recipient' })
      return rows.sort((a, b) => a._id - b._id)
    },
    body(txid: string): Buffer | undefined {
      const row = sqlite
        .prepare('SELECT b.raw FROM message_bodies b JOIN messages m ON m.id = b.message_id WHERE m.txid = ?')
        .get(txid) as { raw: Buffer } | undefined
      return row?.raw
    },
    /** The queued message as the client sent it: the bytes after this server's Received line (RFC 5321 §4.4), which must be first. */
    sent(txid: string): string {
      const queued = this.body(txid)?.toString('utf8') ?? ''
      // The Received header and its folded lines.
      const [line] = /^Received:.*\r\n(?:[ \t].*\r\n)*/.exec(queued) ?? ['']
      const by = e.services.config.nodeName.replace(/\./g, '\\.')
      expect(line.replace(/\r\n(?=[ \t])/g, '')).toMatch(
        new RegExp(
          `^Received: from client\\.example \\(\\[127\\.0\\.0\\.1\\]\\) by ${by} \\(mailroom\\) with ESMTPS?A id ${txid}; \\w{3}, \\d{2} \\w{3} \\d{4} \\d{2}:\\d{2}:\\d{2} \\+0000\\r\\n$`,
        ),
      )
      return queued.slice(line.length)
    },
    /** Rows in every table a submission writes to, all orders together. */
    stored: () => ({ messages: count('messages'), bodies: count('message_bodies'), deliveries: count('deliveries') }),
  }
}

type Started = Awaited<ReturnType<typeof start>>
const NOTHING = { messages: 0, bodies: 0, deliveries: 0 }

/** Logs in over STARTTLS and returns the authenticated client. */
async function authed(t: Started, method: 'PLAIN' | 'LOGIN' = 'PLAIN') {
  const c = await t.client()
  await c.login(t.user, t.password, method)
  return c
}

const txidOf = (response: string) => {
  const m = QUEUED.exec(response)
  expect(m, `reply ${JSON.stringify(response)}`).not.toBeNull()
  return m![1]
}

/**
 * The words of a header value as an RFC 5322 reader takes them (§3.2): comments, which nest and
 * take quoted-pairs, are left out; a quoted string or a domain literal is one word; a special
 * such as `;` or a stray `)` stands alone.
 */
function structuredWords(value: string): string[] {
  const words: string[] = []
  let i = 0
  while (i < value.length) {
    if (/\s/.test(value[i])) {
      i++
    } else if (value[i] === '(') {
      let depth = 0
      do {
        if (value[i] === '\\') i++
        else if (value[i] === '(') depth++
        else if (value[i] === ')') depth--
        i++
      } while (depth > 0 && i < value.length)
    } else {
      const [word] = /^(?:"(?:[^"\\]|\\.)*"|\[[^[\]\\]*\]|[^\s()<>[\]:;@\\,"]+|.)/.exec(value.slice(i))!
      words.push(word)
      i += word.length
    }
  }
  return words
}

describe('SMTP submission: AUTH and acceptance', () => {
  it.each(['PLAIN', 'LOGIN'] as const)(
    'accepts a message after STARTTLS and AUTH %s, and queues the bytes sent after its Received line',
    async (method) => {
      const t = await start()
      const c = await authed(t, method)
      expect(c.secure).toBe(true)
      const raw = message()
      const info = await c.send({ from: 'alice@example.org', to: ['bob@example.net', 'carol@example.com'] }, raw)
      const txid = txidOf(info.response)
      expect(info.accepted).toEqual(['bob@example.net', 'carol@example.com'])
      expect(info.rejected).toEqual([])

      const rows = await t.log()
      expect(rows).toHaveLength(2)
      for (const row of rows) {
        expect(row).toMatchObject({
          id: txid,
          from: 'alice@example.org',
          orderId: t.env.orderId,
          transtype: 'ESMTPSA',
          interface: 'feeder',
          origin: '127.0.0.1',
          subject: 'hello there',
          messageId: '<m1.submission@example.org>',
          bodySize: t.body(txid)!.length,
          delivered: 0,
        })
      }
      expect(rows.map((r) => [r.seq, r.recipient])).toEqual([
        [1, 'bob@example.net'],
        [2, 'carol@example.com'],
      ])
      expect(t.sent(txid)).toBe(raw)
      expect(t.stored()).toEqual({ messages: 1, bodies: 1, deliveries: 2 })
    },
  )

  it('gives each message of one authenticated connection its own transaction id', async () => {
    const t = await start()
    const c = await authed(t)
    const first = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    const second = txidOf(
      (
        await c.send(
          { from: 'alice@example.org', to: ['carol@example.com'] },
          message('alice@example.org', 'carol@example.com', 'Second.'),
        )
      ).response,
    )
    expect(second).not.toBe(first)
    const rows = await t.log()
    expect(rows.map((r) => [r.id, r.recipient])).toEqual([
      [first, 'bob@example.net'],
      [second, 'carol@example.com'],
    ])
    expect(t.body(second)?.toString()).toContain('Second.')
  })

  it('refuses AUTH before STARTTLS by default, and then refuses to relay', async () => {
    const t = await start()
    const c = await t.client({ tls: false })
    expect(c.secure).toBe(false)
    const err = await refusal(c.login(t.user, t.password))
    expect(err.responseCode).toBe(538)
    expect(err.response).toMatch(/^538 .*STARTTLS/)
    const mail = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(mail.responseCode).toBe(530)
    expect(mail.response).toBe('530 5.7.0 Authentication required')
    expect(t.stored()).toEqual(NOTHING)
  })

  it('allows AUTH without TLS when MAILROOM_SMTP_AUTH_REQUIRES_TLS=false, recorded as ESMTPA', async () => {
    const t = await start({ MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false' })
    const c = await t.client({ tls: false })
    await c.login(t.user, t.password, 'LOGIN')
    expect(c.secure).toBe(false)
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    const rows = await t.log()
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({
      id: txid,
      transtype: 'ESMTPA',
      interface: 'feeder',
      origin: '127.0.0.1',
      recipient: 'bob@example.net',
    })
  })

  it('still records ESMTPSA when TLS is optional but was used', async () => {
    const t = await start({ MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false' })
    const c = await authed(t)
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    expect((await t.log())[0]).toMatchObject({ id: txid, transtype: 'ESMTPSA' })
  })
})

describe('SMTP submission: the Received line', () => {
  it('writes an EHLO name that is no domain as a quoted string: it cannot hide or add clauses (RFC 5321 §4.4)', async () => {
    const t = await start()
    const { raw } = await t.rawSession({ name: 'x])_by_evil.example_(spoof' })
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    const txid = txidOf(await raw.data(dataOf(message())))
    const [received] = /^Received:.*\r\n(?:[ \t].*\r\n)*/.exec(t.body(txid)!.toString('utf8'))!
    const words = structuredWords(received.slice('Received:'.length).replace(/\r\n(?=[ \t])/g, ''))
    expect(words.slice(0, words.indexOf(';'))).toEqual([
      'from',
      '"x])_by_evil.example_(spoof"',
      'by',
      t.env.services.config.nodeName,
      'with',
      'ESMTPSA',
      'id',
      txid,
    ])
  })
})

describe('SMTP submission: refused credentials', () => {
  it('answers 535 to a wrong password, and the session cannot send', async () => {
    const t = await start()
    const c = await t.client()
    const err = await refusal(c.login(t.user, `${t.password}x`))
    expect(err.responseCode).toBe(535)
    expect(err.response).toBe('535 5.7.8 Authentication credentials invalid')
    const mail = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(mail.responseCode).toBe(530)
    expect(t.stored()).toEqual(NOTHING)
  })

  it.each([
    ['an order that does not exist', 'mb999999'],
    ['a name that is not mb<id>', 'alice'],
    ['upper-case MB', 'MB{id}'],
    ['a trailing character', 'mb{id}x'],
    ['the bare order id', '{id}'],
    // The same number written otherwise is not the order's username (mb<id> only).
    ['a leading zero', 'mb0{id}'],
    ['leading zeros', 'mb00{id}'],
    ['a signed id', 'mb+{id}'],
  ])('answers 535 to %s', async (_what, pattern) => {
    const t = await start()
    const c = await t.client()
    const err = await refusal(c.login(pattern.replace('{id}', String(t.env.orderId)), t.password))
    expect(err.responseCode).toBe(535)
    expect(err.response).toBe('535 5.7.8 Authentication credentials invalid')
    expect(t.stored()).toEqual(NOTHING)
  })

  it('answers 535 for a canceled order, even with its right password', async () => {
    const t = await start()
    await t.env.services.store.orders.setStatus(t.env.orderId, 'canceled')
    for (const method of ['PLAIN', 'LOGIN'] as const) {
      const c = await t.client()
      const err = await refusal(c.login(t.user, t.password, method))
      expect(err.responseCode).toBe(535)
      expect(err.response).toBe(`535 5.7.8 Mail order ${t.user} is canceled`)
    }
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses MAIL FROM with 550 5.7.1 when the order is canceled after AUTH', async () => {
    const t = await start()
    const c = await authed(t)
    await t.env.services.store.orders.setStatus(t.env.orderId, 'canceled')
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(err.responseCode).toBe(550)
    expect(err.response).toBe(`550 5.7.1 Mail order ${t.user} is canceled`)
    expect(t.stored()).toEqual(NOTHING)
  })

  /** A session through RCPT TO; `meanwhile` runs before DATA; resolves with the reply to the message. */
  async function changedBeforeData(t: Awaited<ReturnType<typeof start>>, meanwhile: () => Promise<unknown>) {
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
    await meanwhile()
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    return raw.data(dataOf(message()))
  }

  it('refuses the message (550 5.7.1) when the order is canceled between RCPT TO and the end of DATA', async () => {
    const t = await start()
    expect(await changedBeforeData(t, () => t.env.services.store.orders.setStatus(t.env.orderId, 'canceled'))).toMatch(
      /^550 5\.7\.1 .*mb\d+ is canceled/i,
    )
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses the message (553 5.7.1) when the sender stops being authorized before the end of DATA', async () => {
    const t = await start()
    expect(
      await changedBeforeData(t, () => t.env.services.store.orders.addSender(t.env.orderId, '@other.example')),
    ).toMatch(/^553 5\.7\.1 .*alice@example\.org is not an authorized sender/)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses AUTH PLAIN asking to act as another order (an authzid other than the authcid), and takes one equal to it', async () => {
    const t = await start()
    const other = await t.env.newAccount()
    const { raw } = await t.rawSession({ auth: false })
    const plain = (authzid: string, authcid: string) =>
      raw.cmd(`AUTH PLAIN ${Buffer.from(`${authzid}\0${authcid}\0${t.password}`).toString('base64')}`)
    expect(await plain(`mb${other.orderId}`, t.user)).toBe(`535 5.7.8 ${t.user} may not act as mb${other.orderId}`)
    expect(await plain(t.user, t.user)).toMatch(/^235 /)
  })

  it('does not mix the credentials of two accounts', async () => {
    const t = await start()
    const other = await t.env.newAccount()
    const otherPassword = await t.env.services.store.orders.password(other.orderId)
    expect(otherPassword).not.toBe(t.password)

    for (const [user, pass] of [
      [`mb${other.orderId}`, t.password],
      [t.user, otherPassword],
    ]) {
      const c = await t.client()
      const err = await refusal(c.login(user, pass))
      expect(err.responseCode).toBe(535)
    }
    expect(t.stored()).toEqual(NOTHING)

    // The other order's own password works, and the message is logged under that order only.
    const c = await t.client()
    await c.login(`mb${other.orderId}`, otherPassword)
    const txid = txidOf(
      (await c.send({ from: 'dave@example.org', to: ['bob@example.net'] }, message('dave@example.org'))).response,
    )
    expect((await t.log(other.orderId)).map((r) => [r.id, r.orderId])).toEqual([[txid, other.orderId]])
    expect(await t.log()).toEqual([])
  })
})

describe('SMTP submission: never an open relay', () => {
  it('refuses MAIL FROM with 530 without AUTH, even over TLS', async () => {
    const t = await start()
    const c = await t.client()
    expect(c.secure).toBe(true)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(err.responseCode).toBe(530)
    expect(err.response).toBe('530 5.7.0 Authentication required')
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses MAIL, RCPT and DATA of an unauthenticated session, and stores nothing', async () => {
    const t = await start({ MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false' })
    const raw = await t.raw()
    expect(await raw.cmd('EHLO client.example')).toMatch(/^250/)
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toBe('530 5.7.0 Authentication required')
    // RCPT never reaches onRcptTo without an accepted MAIL: smtp-server answers 503 first.
    const rcpt = await raw.cmd('RCPT TO:<bob@example.net>')
    expect(rcpt).toMatch(/^5\d\d /)
    expect(rcpt).not.toMatch(/^25\d/)
    expect(await raw.cmd('DATA')).toMatch(/^503 /)
    expect(await raw.cmd('QUIT')).toMatch(/^221 /)
    expect(t.stored()).toEqual(NOTHING)
  })
})

describe('SMTP submission: failed-AUTH throttling', () => {
  it('refuses even the right password with 454 after MAILROOM_SMTP_MAX_AUTH_FAILURES failures, until the window passes', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    for (let i = 0; i < 3; i++) {
      const c = await t.client()
      const err = await refusal(c.login(t.user, `wrong-${i}`))
      expect(err.responseCode, `failure ${i + 1}`).toBe(535)
    }
    const throttled = await t.client()
    const err = await refusal(throttled.login(t.user, t.password))
    expect(err.responseCode).toBe(454)
    expect(err.response).toBe('454 4.7.0 Too many failed authentication attempts; try again later')
    const mail = await refusal(throttled.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(mail.responseCode).toBe(530)

    // Still inside the window (counted from the first failure).
    t.env.clock.advance(AUTH_FAILURE_WINDOW_MS - MINUTE)
    expect((await refusal((await t.client()).login(t.user, t.password))).responseCode).toBe(454)
    expect(t.stored()).toEqual(NOTHING)

    t.env.clock.advance(2 * MINUTE)
    const c = await authed(t)
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    expect((await t.log()).map((r) => r.id)).toEqual([txid])
  })

  it('counts wrong passwords in the store: a node with its own limits refuses the address too', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    // A second submission server with in-process state of its own, as another node has, on the same store.
    const { store, relay, config, logger, clock, budget } = t.env.services
    const other = createSubmissionServer({
      store,
      relay,
      config,
      logger,
      clock,
      budget,
      tls,
      limits: submissionLimits(config),
    })
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', () => resolve()))
    after.push(() => new Promise<void>((resolve) => other.close(() => resolve())))
    const otherPort = (other.server.address() as AddressInfo).port
    const onOther = async () => {
      const c = await SmtpClient.open(otherPort)
      clients.push(c)
      return c
    }
    // Three guesses between the two: the third starts the throttle on both.
    expect((await refusal((await t.client()).login(t.user, 'wrong-1'))).responseCode).toBe(535)
    expect((await refusal((await onOther()).login(t.user, 'wrong-2'))).responseCode).toBe(535)
    expect((await refusal((await t.client()).login(t.user, 'wrong-3'))).responseCode).toBe(535)
    expect((await refusal((await onOther()).login(t.user, t.password))).responseCode).toBe(454)
    expect((await refusal((await t.client()).login(t.user, t.password))).responseCode).toBe(454)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('allows the attempts below the limit', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    for (let i = 0; i < 2; i++)
      expect((await refusal((await t.client()).login(t.user, 'wrong'))).responseCode).toBe(535)
    const c = await authed(t)
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
  })

  it('counts failures across usernames: one address cannot spread guesses over orders', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    const other = await t.env.newAccount()
    for (const user of [t.user, `mb${other.orderId}`, 'mb999999'])
      expect((await refusal((await t.client()).login(user, 'wrong'))).responseCode).toBe(535)
    expect(
      (
        await refusal(
          (await t.client()).login(`mb${other.orderId}`, await t.env.services.store.orders.password(other.orderId)),
        )
      ).responseCode,
    ).toBe(454)
  })

  it('counts a username that is not written as mb<id> as a failure, even with the right password', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    const id = t.env.orderId
    for (const user of [`mb0${id}`, `mb00${id}`, `mb000${id}`])
      expect((await refusal((await t.client()).login(user, t.password))).responseCode, user).toBe(535)
    expect((await refusal((await t.client()).login(t.user, t.password))).responseCode).toBe(454)
    expect(t.stored()).toEqual(NOTHING)
  })

  // Whoever holds one valid login must not interleave it with guesses at other orders' passwords.
  it('keeps counting failures of an address across a successful AUTH in the window', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_AUTH_FAILURES: '3' })
    const other = await t.env.newAccount()
    const victim = `mb${other.orderId}`
    for (let i = 0; i < 2; i++)
      expect((await refusal((await t.client()).login(victim, `guess-${i}`))).responseCode).toBe(535)
    await authed(t) // the attacker's own, valid login
    expect((await refusal((await t.client()).login(victim, 'guess-2'))).responseCode).toBe(535)
    // Three failures from this address in the window: the fourth attempt must be throttled.
    expect((await refusal((await t.client()).login(victim, 'guess-3'))).responseCode).toBe(454)
  })
})

describe('SMTP submission: whose failed AUTH attempts count together', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:DB8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:0001:0002:ffff::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:1:3::1', '2001:db8:1:3::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    // "::" stands for one zero group here: the fourth group is the 1 after it.
    ['2001:db8::1:2:3:4:5', '2001:db8:0:1::/64'],
    ['2001:db8::2:3:4:5', '2001:db8:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
  ])('%s counts as %s', (ip, client) => {
    expect(authClient(ip)).toBe(client)
  })
})

describe('SMTP submission: limits', () => {
  it('advertises SIZE and refuses a bigger message with 552, storing nothing', async () => {
    const t = await start({ MAILROOM_MAX_MESSAGE_SIZE: '2kb' })
    const raw = await t.raw()
    const ehlo = await raw.cmd('EHLO client.example')
    expect(ehlo).toMatch(/^250[- ]SIZE 2048$/m)
    raw.close()

    const c = await authed(t)
    // No SIZE parameter: the server only finds out while reading DATA.
    const big = message('alice@example.org', 'bob@example.net', 'x'.repeat(70).concat('\r\n').repeat(40))
    expect(Buffer.byteLength(big)).toBeGreaterThan(2048)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, big))
    expect(err.responseCode).toBe(552)
    expect(err.response).toMatch(/^552 .*2048/)
    expect(t.stored()).toEqual(NOTHING)

    // The same connection still takes a message under the limit.
    const small = message()
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, small)).response)
    expect(t.sent(txid)).toBe(small)
    expect(t.stored()).toEqual({ messages: 1, bodies: 1, deliveries: 1 })
  })

  it('adds the Date and Message-ID a message lacks after its Received line (RFC 6409 §8), and logs the Message-ID', async () => {
    const t = await start()
    const c = await authed(t)
    const bare = 'From: Alice <alice@example.org>\r\nTo: bob@example.net\r\nSubject: bare\r\n\r\nHello.\r\n'
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, bare)).response)
    const sent = t.sent(txid)
    expect(sent.endsWith(bare)).toBe(true)
    const messageId = `<${txid}.`
    expect(sent.slice(0, -bare.length)).toMatch(
      new RegExp(
        `^Message-ID: ${messageId.replace('.', '\\.')}[0-9a-f]{12}@example\\.org>\r\nDate: Sun, 22 Nov 2026 12:00:00 \\+0000\r\n$`,
      ),
    )
    expect((await t.log())[0].messageId).toMatch(
      new RegExp(`^${messageId.replace('.', '\\.')}[0-9a-f]{12}@example\\.org>$`),
    )
  })

  it('takes a message of exactly the limit: its Received line and added headers are not counted against it', async () => {
    const t = await start({ MAILROOM_MAX_MESSAGE_SIZE: '2kb' })
    const c = await authed(t)
    // Without Date and Message-ID, which are added.
    const head = 'From: Alice <alice@example.org>\r\nTo: bob@example.net\r\nSubject: at the limit\r\n\r\n'
    const exact = `${head + 'x'.repeat(2048 - Buffer.byteLength(head) - 2)}\r\n`
    expect(Buffer.byteLength(exact)).toBe(2048)
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, exact)).response)
    expect(t.sent(txid)).toMatch(/^Message-ID: .*\r\nDate: .*\r\nFrom: Alice/)
    expect(t.sent(txid).endsWith(exact)).toBe(true)
  })

  it('refuses a declared SIZE over the limit at MAIL FROM with 552', async () => {
    const t = await start({ MAILROOM_MAX_MESSAGE_SIZE: '2kb' })
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org> SIZE=4096')).toMatch(/^552 .*2048/)
    expect(await raw.cmd('MAIL FROM:<alice@example.org> SIZE=1000')).toMatch(/^250 /)
    expect(t.stored()).toEqual(NOTHING)
  })

  it.each([
    ['an unknown parameter', 'FOO=BAR', 'FOO'],
    ['SMTPUTF8, not offered', 'SMTPUTF8', 'SMTPUTF8'],
    ["DSN's RET, not offered", 'RET=FULL', 'RET'],
    ["DSN's ENVID, not offered", 'ENVID=abc', 'ENVID'],
    ['REQUIRETLS, not offered', 'REQUIRETLS', 'REQUIRETLS'],
  ])('refuses MAIL FROM with %s with 555 5.5.4 (RFC 5321 §4.1.1.11), storing nothing', async (_label, param, name) => {
    const t = await start()
    const { raw, ehlo } = await t.rawSession()
    expect(ehlo).not.toMatch(/SMTPUTF8|DSN|REQUIRETLS/)
    expect(await raw.cmd(`MAIL FROM:<alice@example.org> ${param}`)).toBe(
      `555 5.5.4 MAIL FROM parameter ${name} is not supported (offered: SIZE, BODY, AUTH)`,
    )
    // No transaction was opened: a RCPT has no MAIL to follow.
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^503 /)
    // The offered ones are taken.
    expect(await raw.cmd('MAIL FROM:<alice@example.org> SIZE=100 BODY=8BITMIME AUTH=<>')).toMatch(/^250 /)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('closes a DATA that has not ended within MAILROOM_SMTP_DATA_TIMEOUT with 421 4.4.2, however the bytes trickle, storing nothing', async () => {
    const t = await start({ MAILROOM_SMTP_DATA_TIMEOUT: '2s' })
    const { raw } = await t.rawSession()
    expect(await raw.pipeline(['MAIL FROM:<alice@example.org>', 'RCPT TO:<bob@example.net>', 'DATA'])).toEqual([
      expect.stringMatching(/^250 /),
      expect.stringMatching(/^250 /),
      expect.stringMatching(/^354 /),
    ])
    // A byte every 200 ms: never idle, never done.
    const drip = setInterval(() => raw.write('x'), 200)
    after.push(async () => clearInterval(drip))
    expect(await raw.next()).toBe('421 4.4.2 The message did not arrive within 2s; closing the connection')
    await raw.closed()
    clearInterval(drip)
    expect(t.stored()).toEqual(NOTHING)
    // Another session within the deadline is taken.
    const c = await authed(t)
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
  })

  it('answers a connection past MAILROOM_SMTP_MAX_CLIENTS with 421, and takes one again once another has gone', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_CLIENTS: '2' })
    const first = await t.raw()
    await t.raw()
    const third = await RawSmtp.open(t.port)
    clients.push(third)
    expect(await third.greeting).toMatch(/^421 .*Too many connected clients/)
    first.close()
    await expect
      .poll(
        async () => {
          const next = await RawSmtp.open(t.port)
          clients.push(next)
          return next.greeting
        },
        { timeout: 5000 },
      )
      .toMatch(/^220 /)
  })

  it('holds at most 50 connections from one address (MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS): of 1,000 from one, the rest get 421 and are closed, and another address is still greeted', async () => {
    const t = await start()
    const flood = await Promise.all(Array.from({ length: 1000 }, () => t.open('127.0.0.50')))
    const greetings = await Promise.all(flood.map((c) => c.greeting))
    expect(greetings.filter((g) => g.startsWith('220 '))).toHaveLength(50)
    expect(new Set(greetings.filter((g) => !g.startsWith('220 ')))).toEqual(
      new Set(['421 4.7.0 Too many connections from 127.0.0.50; try again later']),
    )
    await Promise.all(flood.filter((_, i) => !greetings[i].startsWith('220 ')).map((c) => c.closed()))

    const other = await t.open('127.0.0.51')
    expect(await other.greeting).toMatch(/^220 /)
    expect(await other.cmd('EHLO client.example')).toMatch(/^250[- ]/)
    const fiftyFirst = await t.open('127.0.0.50')
    expect(await fiftyFirst.greeting).toBe('421 4.7.0 Too many connections from 127.0.0.50; try again later')
    await fiftyFirst.closed()
    expect(t.stored()).toEqual(NOTHING)
  })

  it('counts a connection down when it closes, and never a refused one: one address gets its connections again round after round', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS: '2' })
    // The server learns of a close only when the socket's end reaches it: the next one may come a little before.
    const admitted = () =>
      expect.poll(async () => (await t.open('127.0.0.60')).greeting, { timeout: 5000 }).toMatch(/^220 /)
    for (let round = 0; round < 5; round++) {
      await admitted()
      await admitted()
      const third = await t.open('127.0.0.60')
      expect(await third.greeting, `round ${round}`).toMatch(/^421 4\.7\.0 Too many connections from 127\.0\.0\.60/)
      for (const c of clients.splice(0)) c.close()
    }
  })

  it('counts a client once across the STARTTLS and the implicit-TLS servers: the implicit-TLS one refuses a connection past the limit', async () => {
    const t = await start({ MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS: '1' })
    const { store, relay, config, logger, clock, budget } = t.env.services
    const secure = createSubmissionServer(
      { store, relay, config, logger, clock, budget, tls, limits: t.limits },
      { secure: true },
    )
    await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', () => resolve()))
    after.push(() => new Promise<void>((resolve) => secure.close(() => resolve())))
    const securePort = (secure.server.address() as AddressInfo).port
    const plain = await t.open('127.0.0.70')
    expect(await plain.greeting).toMatch(/^220 /)
    const second = await RawSmtp.open(securePort, '127.0.0.1', '127.0.0.70', true)
    clients.push(second)
    expect(await second.greeting).toBe('421 4.7.0 Too many connections from 127.0.0.70; try again later')
    // Over implicit TLS the session is secure from the start: AUTH is offered without STARTTLS.
    const other = await RawSmtp.open(securePort, '127.0.0.1', '127.0.0.71', true)
    clients.push(other)
    expect(await other.greeting).toMatch(/^220 /)
    const ehlo = await other.cmd('EHLO client.example')
    expect(ehlo).toContain('AUTH PLAIN LOGIN')
    expect(ehlo).not.toContain('STARTTLS')
    expect(await other.authPlain(t.user, t.password)).toMatch(/^235 /)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('closes a connection not authenticated within MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT with 421, while an authenticated one stays', async () => {
    // Long enough that the logged-in session surely gets through AUTH first on a busy machine.
    const t = await start({ MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT: '3s' })
    const { raw: session } = await t.rawSession()
    const idle = await t.raw()
    expect(await idle.cmd('EHLO client.example')).toMatch(/^250[- ]/)
    expect(await idle.next()).toBe('421 4.7.0 Not authenticated within 3s; closing the connection')
    await idle.closed()
    // The authenticated session has been idle longer than that, and goes on.
    expect(await session.cmd('NOOP')).toMatch(/^250 /)
    expect(await session.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
  })

  it('refuses the third RCPT with 452 when MAILROOM_MAX_RECIPIENTS=2, and queues for the first two', async () => {
    const t = await start({ MAILROOM_MAX_RECIPIENTS: '2' })
    const c = await authed(t)
    const info = await c.send(
      { from: 'alice@example.org', to: ['one@example.net', 'two@example.net', 'three@example.net'] },
      message(),
    )
    const txid = txidOf(info.response)
    expect(info.accepted).toEqual(['one@example.net', 'two@example.net'])
    expect(info.rejected).toEqual(['three@example.net'])
    expect(info.rejectedErrors?.[0].responseCode).toBe(452)
    expect(info.rejectedErrors?.[0].response).toBe('452 4.5.3 Too many recipients: 2 per message')
    expect((await t.log()).map((r) => [r.id, r.recipient])).toEqual([
      [txid, 'one@example.net'],
      [txid, 'two@example.net'],
    ])
    // A recipient given again (in any case) at the limit is not one more.
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<one@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<two@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<ONE@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<three@example.net>')).toMatch(/^452 4\.5\.3 /)
  })
})

/** A budget of 64 KB per account, 128 KB in all: a message of the largest size holds its account's share. */
const SMALL_BUDGET = {
  MAILROOM_MAX_MESSAGE_SIZE: '64kb',
  MAILROOM_HTTP_BODY_LIMIT: '64kb',
  MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '64kb',
  MAILROOM_MEMORY_BUDGET: '128kb',
}
const BUSY = '451 4.3.1 The server is busy: it holds as many messages in memory as it may; try again later'
/** A message of about `bytes` bytes. */
const messageOf = (bytes: number) =>
  message('alice@example.org', 'bob@example.net', `${'x'.repeat(98)}\r\n`.repeat(bytes / 100))

/**
 * A session of the first order in the middle of DATA: MAIL FROM with SIZE=`size` (RFC 1870),
 * the head of its message sent, the rest not yet. `finish` sends the rest and resolves with the reply.
 */
async function midData(t: Started, size: number) {
  const { raw } = await t.rawSession()
  expect(await raw.cmd(`MAIL FROM:<alice@example.org> SIZE=${size}`)).toMatch(/^250 /)
  expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
  expect(await raw.cmd('DATA')).toMatch(/^354 /)
  const [head, rest] = [dataOf(message()).subarray(0, 40), dataOf(message()).subarray(40)]
  const reply = raw.data(head)
  return { raw, finish: () => (raw.write(rest), reply) }
}

describe('SMTP submission: the memory budget', () => {
  it('answers 451 4.3.1 at DATA while the account holds its share, stores nothing, and takes the message once it is free', async () => {
    const t = await start(SMALL_BUDGET)
    const first = await midData(t, 60_000)
    // The declared SIZE is held from DATA on, before a byte of the message arrived.
    expect(t.held()).toBe(60_000)
    const c = await authed(t)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(err.responseCode).toBe(451)
    expect(err.response).toBe(BUSY)
    expect(t.stored()).toEqual(NOTHING)
    expect(t.held()).toBe(60_000)

    expect(await first.finish()).toMatch(QUEUED)
    expect(t.held()).toBe(0)
    // The same connection is answered as usual once the budget has room.
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    expect(t.stored()).toEqual({ messages: 2, bodies: 2, deliveries: 2 })
    expect(t.held()).toBe(0)
  })

  it('refuses at MAIL FROM, with 452 4.3.1, a declared SIZE the account cannot hold now; storing nothing', async () => {
    const t = await start(SMALL_BUDGET)
    const first = await midData(t, 60_000)
    const { raw } = await t.rawSession()
    // RFC 1870 §6.1: refused before a byte of the message is sent.
    expect(await raw.cmd('MAIL FROM:<alice@example.org> SIZE=60000')).toBe(BUSY.replace(/^451/, '452'))
    // A size that fits beside the first one is taken.
    expect(await raw.cmd('MAIL FROM:<alice@example.org> SIZE=2000')).toMatch(/^250 /)
    expect(t.stored()).toEqual(NOTHING)
    expect(t.held()).toBe(60_000)
    expect(await first.finish()).toMatch(QUEUED)
    expect(t.held()).toBe(0)
  })

  it("takes another account's message while the first account is at its limit", async () => {
    const t = await start(SMALL_BUDGET)
    const first = await midData(t, 64 * 1024)
    const c = await authed(t)
    expect((await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))).response).toBe(
      BUSY,
    )
    const other = await t.env.newAccount()
    const c2 = await t.client()
    await c2.login(`mb${other.orderId}`, await t.env.services.store.orders.password(other.orderId))
    const txid = txidOf((await c2.send({ from: 'carol@example.org', to: ['dave@example.net'] }, message())).response)
    expect((await t.log(other.orderId)).map((r) => r.id)).toEqual([txid])
    expect(t.stored()).toEqual({ messages: 1, bodies: 1, deliveries: 1 })
    expect(await first.finish()).toMatch(QUEUED)
    expect(t.held()).toBe(0)
  })

  it('reads a message without SIZE that outgrows the budget to its end, drops it and answers 451 4.3.1, storing nothing', async () => {
    const limits = { MAILROOM_MAX_MESSAGE_SIZE: '200kb', MAILROOM_HTTP_BODY_LIMIT: '200kb' }
    const t = await start({ ...limits, MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '200kb', MAILROOM_MEMORY_BUDGET: '200kb' })
    // Another door holds half: the message's first 64 KB fit, the rest does not.
    const elsewhere = t.env.services.budget.reserve(100 * 1024, null)!
    const c = await authed(t)
    const big = messageOf(150_000)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, big))
    expect(err.response).toBe(BUSY)
    expect(t.stored()).toEqual(NOTHING)
    expect(t.held()).toBe(100 * 1024)
    elsewhere.release()
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, big)).response)
    expect(t.held()).toBe(0)
  })

  it('gives back what a message held on every other path: 552 past the size limit, a refusal at the end of DATA, a client gone mid-message', async () => {
    const t = await start(SMALL_BUDGET)
    const c = await authed(t)
    const tooBig = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, messageOf(70_000)))
    expect(tooBig.responseCode).toBe(552)
    expect(t.held()).toBe(0)

    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    expect(await raw.data(Buffer.from('From: alice@example.org\r\nX-A: 1\rB\r\n\r\nbody\r\n.\r\n'))).toMatch(
      /^550 5\.6\.0 /,
    )
    expect(t.held()).toBe(0)

    const gone = await midData(t, 60_000)
    expect(t.held()).toBe(60_000)
    gone.raw.close()
    await vi.waitFor(() => expect(t.held()).toBe(0), { timeout: 10_000 })
    expect(t.stored()).toEqual(NOTHING)
  })

  it('answers swaks 451 4.3.1 at DATA too, storing nothing', async () => {
    const t = await start(SMALL_BUDGET)
    const elsewhere = t.env.services.budget.reserve(64 * 1024, t.env.accountId)!
    const { stdout } = await execFileAsync('swaks', [
      ...['--server', `127.0.0.1:${t.port}`, '--tls', '--auth', 'PLAIN'],
      ...['--auth-user', t.user, '--auth-password', t.password],
      ...['--from', 'alice@example.org', '--to', 'bob@example.net', '--body', 'Hello from swaks'],
    ]).catch((err: { stdout: string }) => err)
    expect(stdout).toContain(`<~* ${BUSY}`)
    expect(t.stored()).toEqual(NOTHING)
    elsewhere.release()
    expect(t.held()).toBe(0)
  })
})

describe('SMTP submission: senders and deny rules', () => {
  it.each([
    ['email', 'bad@example.org', 'BAD@Example.org'],
    ['domain', 'spam.example', 'anyone@SPAM.example'],
    ['startswith', 'noreply', 'noreply-bot@example.org'],
  ] as const)('refuses MAIL FROM with 550 5.7.1 naming a %s rule', async (type, data, sender) => {
    const t = await start()
    const rule = await t.env.services.store.rules.create({ orderId: t.env.orderId, type, data, now: t.env.clock() })
    const c = await authed(t)
    const err = await refusal(c.send({ from: sender, to: ['bob@example.net'] }, message(sender)))
    expect(err.responseCode).toBe(550)
    expect(err.response).toBe(`550 5.7.1 from: sender ${sender} is rejected by deny rule ${rule.id} (${type} ${data})`)
    expect(t.stored()).toEqual(NOTHING)

    // A sender the rule does not match goes through on the same connection.
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
    expect((await t.log()).map((r) => r.id)).toEqual([txid])
  })

  it("does not apply another order's deny rules", async () => {
    const t = await start()
    const other = await t.env.newAccount()
    await t.env.services.store.rules.create({
      orderId: other.orderId,
      type: 'domain',
      data: 'example.org',
      now: t.env.clock(),
    })
    const c = await authed(t)
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
  })

  it('refuses only the RCPT a destination rule names, and queues the message for the others', async () => {
    const t = await start()
    const rule = await t.env.services.store.rules.create({
      orderId: t.env.orderId,
      type: 'destination',
      data: 'blocked@example.net',
      now: t.env.clock(),
    })
    const c = await authed(t)
    const info = await c.send(
      { from: 'alice@example.org', to: ['ok1@example.net', 'Blocked@Example.net', 'ok2@example.net'] },
      message(),
    )
    const txid = txidOf(info.response)
    expect(info.accepted).toEqual(['ok1@example.net', 'ok2@example.net'])
    expect(info.rejected).toEqual(['Blocked@Example.net'])
    expect(info.rejectedErrors?.[0].responseCode).toBe(550)
    expect(info.rejectedErrors?.[0].response).toBe(
      `550 5.7.1 to: recipient Blocked@Example.net is rejected by deny rule ${rule.id} (destination blocked@example.net)`,
    )
    expect((await t.log()).map((r) => [r.id, r.seq, r.recipient])).toEqual([
      [txid, 1, 'ok1@example.net'],
      [txid, 2, 'ok2@example.net'],
    ])
    expect(t.stored()).toEqual({ messages: 1, bodies: 1, deliveries: 2 })
  })

  it('stores nothing when a destination rule refuses the only recipient', async () => {
    const t = await start()
    await t.env.services.store.rules.create({
      orderId: t.env.orderId,
      type: 'destination',
      data: 'blocked@example.net',
      now: t.env.clock(),
    })
    const c = await authed(t)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['blocked@example.net'] }, message()))
    expect(err.responseCode).toBe(550)
    expect(err.response).toMatch(/^550 5\.7\.1 to: recipient blocked@example\.net is rejected by deny rule \d+/)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('takes a quoted local part that needs no quotes as the bare address: a deny rule on it applies', async () => {
    const t = await start()
    const rule = await t.env.services.store.rules.create({
      orderId: t.env.orderId,
      type: 'destination',
      data: 'blocked@example.net',
      now: t.env.clock(),
    })
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<"alice"@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<"blocked"@example.net>')).toBe(
      `550 5.7.1 to: recipient blocked@example.net is rejected by deny rule ${rule.id} (destination blocked@example.net)`,
    )
    expect(await raw.cmd('RCPT TO:<"bob"@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    const txid = txidOf(await raw.data(dataOf(message())))
    expect((await t.log()).map((r) => [r.id, r.from, r.recipient])).toEqual([
      [txid, 'alice@example.org', 'bob@example.net'],
    ])
  })

  it('refuses an envelope sender outside the authorized senders with 553 5.7.1', async () => {
    const t = await start()
    await t.env.services.store.orders.addSender(t.env.orderId, '@example.org')
    const c = await authed(t)
    const err = await refusal(
      c.send({ from: 'alice@example.com', to: ['bob@example.net'] }, message('alice@example.com')),
    )
    expect(err.responseCode).toBe(553)
    expect(err.response).toBe(
      `553 5.7.1 from: alice@example.com is not an authorized sender of mail order ${t.user} (allowed: @example.org)`,
    )
    expect(t.stored()).toEqual(NOTHING)

    // An authorized sender, in any case, is accepted.
    const txid = txidOf((await c.send({ from: 'Alice@EXAMPLE.org', to: ['bob@example.net'] }, message())).response)
    expect((await t.log()).map((r) => [r.id, r.from])).toEqual([[txid, 'Alice@EXAMPLE.org']])
  })

  it('checks only the envelope sender over SMTP: a different From header is accepted', async () => {
    const t = await start()
    await t.env.services.store.orders.addSender(t.env.orderId, '@example.org')
    const c = await authed(t)
    const raw = message('mallory@elsewhere.example')
    const txid = txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, raw)).response)
    const rows = await t.log()
    expect(rows.map((r) => [r.id, r.from])).toEqual([[txid, 'alice@example.org']])
    const byHeader = await t.env.services.store.mail.log({
      orderId: t.env.orderId,
      headerfrom: 'mallory@elsewhere.example',
      skip: 0,
      limit: 10,
      dir: 'desc',
      groupby: 'message',
    })
    expect(byHeader.rows.map((r) => r.id)).toEqual([txid])
    expect(t.sent(txid)).toBe(raw)
  })

  it('takes internationalized domains in their ASCII (punycode) form, and does not offer SMTPUTF8', async () => {
    const t = await start()
    const { raw, ehlo } = await t.rawSession()
    expect(ehlo).toMatch(/^250-PIPELINING$/m)
    expect(ehlo).not.toMatch(/SMTPUTF8/)
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<user@xn--bcher-kva.example>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<user@example.xn--p1ai>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    const txid = txidOf(await raw.data(dataOf(message())))
    expect((await t.log()).map((r) => [r.id, r.recipient])).toEqual([
      [txid, 'user@xn--bcher-kva.example'],
      [txid, 'user@example.xn--p1ai'],
    ])
  })

  it.each(ESCAPED_RECIPIENTS)(
    'refuses RCPT TO behind $block spelled with quoted-pairs ($escaped) as the plain one, storing nothing',
    async ({ plain, escaped, refusal }) => {
      const t = await start()
      await blockRecipients(t.env)
      const { raw } = await t.rawSession()
      expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
      const reply = await raw.cmd(`RCPT TO:<${escaped}>`)
      expect(reply).toMatch(new RegExp(`^550 5\\.7\\.1 to: ${refusal.source}`))
      expect(await raw.cmd('DATA')).toMatch(/^503 /)
      expect(t.stored()).toEqual(NOTHING)
      // The plain spelling, from a sender a trap hit has not blocked, gets the same reply.
      expect(await raw.cmd('RSET')).toMatch(/^250 /)
      expect(await raw.cmd('MAIL FROM:<carol@example.org>')).toMatch(/^250 /)
      expect(await raw.cmd(`RCPT TO:<${plain}>`)).toBe(reply.replace(/alice@example\.org/g, 'carol@example.org'))
    },
  )

  it('refuses an address literal at MAIL FROM and RCPT TO with 553, saying so', async () => {
    const t = await start()
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@[192.0.2.1]>')).toBe(
      '553 5.1.7 alice@[192.0.2.1] is an address literal; mail goes only to addresses at a domain name',
    )
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<u@[127.0.0.1]>')).toBe(
      '553 5.1.3 u@[127.0.0.1] is an address literal; mail goes only to addresses at a domain name',
    )
    expect(await raw.cmd('DATA')).toMatch(/^503 /)
    expect(t.stored()).toEqual(NOTHING)
  })

  // Delivery writes a bare CR as a line end: a Subject or From behind one would be delivered
  // without being read here (the subject filter, the log's headerfrom).
  it('refuses a message with a bare CR in its header at the end of DATA with 550 5.6.0, storing nothing', async () => {
    const t = await start()
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    const forged = Buffer.from(
      'From: Alice <alice@example.org>\r\nX-A: 1\rFrom: ceo@bank.example\r\r\nTo: bob@example.net\r\n\r\nbody\r\n.\r\n',
    )
    expect(await raw.data(forged)).toBe(
      '550 5.6.0 message: line 2 of the header has a bare CR; RFC 5322 §2.2 requires CRLF',
    )
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses a null or malformed envelope address with 553', async () => {
    const t = await start()
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<>')).toBe('553 5.1.7 A sender address is required')
    expect(await raw.cmd('MAIL FROM:<alice@localhost>')).toBe('553 5.1.7 alice@localhost is not a valid address')
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    expect(await raw.cmd('RCPT TO:<bob@localhost>')).toBe('553 5.1.3 bob@localhost is not a valid address')
    expect(await raw.cmd('DATA')).toMatch(/^503 /)
    expect(t.stored()).toEqual(NOTHING)
  })

  // smtp-server answers these before mailroom's handlers see the address; docs/relay.md says so.
  it('refuses an envelope address that is not <local@domain> with 501, as docs/relay.md says', async () => {
    const t = await start()
    const { raw } = await t.rawSession()
    const relayDoc = readFileSync(new URL('../../docs/relay.md', import.meta.url), 'utf8').replace(/\s+/g, ' ')
    for (const command of ['MAIL FROM:<alice>', 'MAIL FROM:alice@example.org', 'MAIL FROM:<a@b@example.org>']) {
      expect(await raw.cmd(command), command).toBe('501 Error: Bad sender address syntax')
    }
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    for (const command of ['RCPT TO:<bob>', 'RCPT TO:bob@example.net', 'RCPT TO:<>']) {
      expect(await raw.cmd(command), command).toBe('501 Error: Bad recipient address syntax')
    }
    expect(await raw.cmd('DATA')).toMatch(/^503 /)
    expect(t.stored()).toEqual(NOTHING)
    expect(relayDoc).toContain('`501 Error: Bad sender address syntax` at MAIL FROM')
    expect(relayDoc).toContain('`501 Error: Bad recipient address syntax` at RCPT TO')
  })
})

describe('SMTP submission: spam filter', () => {
  it('refuses a blocked sender at MAIL FROM with 550 5.7.1, storing nothing', async () => {
    const t = await start()
    await t.env.services.store.blocks.addToList({
      accountId: t.env.accountId,
      source: 'internal',
      kind: 'sender',
      address: 'spammer@example.org',
      reason: 'test',
      now: t.env.clock(),
    })
    const c = await authed(t)
    const err = await refusal(
      c.send({ from: 'Spammer@Example.org', to: ['bob@example.net'] }, message('spammer@example.org')),
    )
    expect(err.responseCode).toBe(550)
    expect(err.response).toMatch(/^550 5\.7\.1 from: sender Spammer@Example\.org is blocked/)
    expect(t.stored()).toEqual(NOTHING)
  })

  it("does not apply another account's block list", async () => {
    const t = await start()
    const other = await t.env.newAccount()
    await t.env.services.store.blocks.addToList({
      accountId: other.accountId,
      source: 'internal',
      kind: 'sender',
      address: 'alice@example.org',
      reason: 'test',
      now: t.env.clock(),
    })
    const c = await authed(t)
    txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message())).response)
  })

  it('refuses a recipient on the local block list at its RCPT TO, records a LOCAL_BL_RCPT event, and queues for the others', async () => {
    const t = await start()
    const { store } = t.env.services
    await store.blocks.addToList({
      accountId: t.env.accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'gone@example.net',
      reason: '550 5.1.1 user unknown',
      now: t.env.clock(),
    })
    const c = await authed(t)
    const info = await c.send({ from: 'alice@example.org', to: ['bob@example.net', 'gone@example.net'] }, message())
    const txid = txidOf(info.response)
    expect(info.rejected).toEqual(['gone@example.net'])
    expect(info.rejectedErrors?.[0].responseCode).toBe(550)
    expect(info.rejectedErrors?.[0].response).toMatch(
      /^550 5\.7\.1 to: recipient gone@example\.net is on this account's local block list/,
    )
    expect((await t.log()).map((r) => [r.id, r.recipient])).toEqual([[txid, 'bob@example.net']])
    const events = await store.blocks.events(t.env.accountId, 'LOCAL_BL_RCPT', 0)
    expect(events).toMatchObject([{ rule: 'LOCAL_BL_RCPT', envFrom: 'alice@example.org', rcptTo: 'gone@example.net' }])
  })

  it('closes a connection with 421 past MAILROOM_MAX_RECIPIENTS refused recipients without a message accepted', async () => {
    const t = await start({ MAILROOM_MAX_RECIPIENTS: '3' })
    const { store } = t.env.services
    await store.blocks.addToList({
      accountId: t.env.accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'gone@example.net',
      reason: '550 5.1.1 user unknown',
      now: t.env.clock(),
    })
    const { raw } = await t.rawSession()
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    // Two refused, then a message accepted: the count starts again.
    expect(await raw.cmd('RCPT TO:<gone@example.net>')).toMatch(/^550 5\.7\.1 /)
    expect(await raw.cmd('RCPT TO:<bob@localhost>')).toMatch(/^553 5\.1\.3 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toMatch(/^250 /)
    expect(await raw.cmd('DATA')).toMatch(/^354 /)
    expect(await raw.data(dataOf(message()))).toMatch(/^250 /)
    expect(await raw.cmd('MAIL FROM:<alice@example.org>')).toMatch(/^250 /)
    for (let i = 0; i < 3; i++) expect(await raw.cmd('RCPT TO:<gone@example.net>')).toMatch(/^550 5\.7\.1 /)
    expect(await raw.cmd('RCPT TO:<bob@example.net>')).toBe(
      '421 4.7.0 3 recipients refused without a message accepted; closing the connection',
    )
    await raw.closed()
    // Each refusal by the block list was recorded, and none after the limit.
    expect(await store.blocks.events(t.env.accountId, 'LOCAL_BL_RCPT', 0)).toHaveLength(4)
  })

  it('refuses a spam trap at RCPT TO and blocks the sender for the next MAIL FROM', async () => {
    const t = await start()
    const { store } = t.env.services
    await store.traps.add('trap@example.net', t.env.clock())
    const c = await authed(t)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['trap@example.net'] }, message()))
    expect(err.responseCode).toBe(550)
    expect(err.response).toMatch(/^550 5\.7\.1 to: recipient trap@example\.net is a spam trap/)
    expect(t.stored()).toEqual(NOTHING)
    expect(await store.blocks.events(t.env.accountId, 'MBTRAP', 0)).toMatchObject([
      { envFrom: 'alice@example.org', rcptTo: 'trap@example.net' },
    ])

    await c.reset() // MAIL was accepted; only the RCPT was refused
    const next = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, message()))
    expect(next.responseCode).toBe(550)
    expect(next.response).toMatch(/^550 5\.7\.1 from: sender alice@example\.org is blocked/)
    expect(t.stored()).toEqual(NOTHING)
  })

  it('refuses a spam-indicative subject at the end of DATA once it was sent more than 4 times', async () => {
    const t = await start()
    const c = await authed(t)
    const spammy = message().replace('Subject: hello there', 'Subject: fast SMTP relay for sale')
    for (let i = 0; i < 5; i++)
      txidOf((await c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, spammy)).response)
    expect(t.stored().messages).toBe(5)
    const err = await refusal(c.send({ from: 'alice@example.org', to: ['bob@example.net'] }, spammy))
    expect(err.responseCode).toBe(550)
    expect(err.response).toMatch(/^550 5\.7\.1 subject: "fast SMTP relay for sale" was sent more than 4 times/)
    expect(t.stored().messages).toBe(5)
  })
})
