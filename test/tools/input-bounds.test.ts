import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { viewMailLog } from '../../tools/view-mail-log.js'
import { expectNothingQueued, headerBlock, storedRaw } from './support.js'

const WORD = 'a'.repeat(8 * 1024 * 1024)

// A subject or display name is a header's text: bounded as a header line is (RFC 5322 §2.1.1),
// refused past it with a 400 that names the field, never a 500 from a check that cannot cope.
describe('REST sends: header text bounds', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const refused = async (path: string, body: Record<string, unknown>, fragment: RegExp) => {
    const res = await call(env, 'POST', path, body)
    const text = await res.text()
    expect({ status: res.status, text }).toEqual({ status: 400, text: expect.stringMatching(fragment) })
    expectNothingQueued(env)
  }

  it.each([
    ['/mail/send', { from: 'me@example.org', to: 'bob@example.com', subject: WORD, body: 'x' }],
    ['/mail/advsend', { from: 'me@example.org', to: 'bob@example.com', subject: WORD, body: 'x' }],
  ])('refuses an 8 MB one-word subject on %s with 400 naming the field and the limit', async (path, body) => {
    await refused(path, body, /subject.*998/i)
  })

  it.each([
    ['from', { from: `${WORD} <me@example.org>` }, /from: display name: at most 998 characters/],
    ['to, as text', { to: `${WORD} <bob@example.com>` }, /to: display name: at most 998 characters/],
    ['cc, as an object', { cc: [{ email: 'carol@example.com', name: WORD }] }, /cc.*name.*998/i],
  ])('refuses an 8 MB one-word display name in %s on /mail/advsend with 400', async (_label, fields, fragment) => {
    await refused(
      '/mail/advsend',
      { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'x', ...fields },
      fragment,
    )
  })

  it('takes a one-word subject and display name of 998 characters, written as encoded words in lines of at most 78', async () => {
    const word = 'b'.repeat(998)
    const res = await call(env, 'POST', '/mail/advsend', {
      from: `${word} <me@example.org>`,
      to: 'bob@example.com',
      subject: word,
      body: 'x',
    })
    expect(res.status).toBe(200)
    const raw = storedRaw(env, ((await res.json()) as { text: string }).text).toString()
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'))
    expect(Math.max(...head.split('\r\n').map((l) => l.length))).toBeLessThanOrEqual(78)
    expect(headerBlock(raw)).toMatch(/^Subject: =\?UTF-8\?Q\?b+\?=/m)
  })
})

// Every string that reaches a search, a regex or a header has a bound: past it, a 400 that names
// the field and the limit, and nothing is read, stored or sent.
describe('REST: bounds on search terms and rule data', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const long = (n: number) => 'a'.repeat(n)
  const search = (params: Record<string, string>) => call(env, 'GET', `/mail/log?${new URLSearchParams(params)}`)

  it.each([
    ['messageId', long(999), 998],
    ['subject', long(999), 998],
    ['mx', long(256), 255],
  ])('refuses a log search with %s past its bound with 400 naming it', async (field, value, max) => {
    const res = await search({ [field]: value })
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 400,
      body: {
        code: 400,
        message: expect.stringMatching(`^${field}: Too big: expected string to have <=${max} characters`),
      },
    })
  })

  it.each(['startDate', 'endDate'])(
    'refuses a log search with a %s in words past 100 characters with 400',
    async (field) => {
      const res = await search({ [field]: `2024-01-15${long(91)}` })
      expect({ status: res.status, body: await res.json() }).toEqual({
        status: 400,
        body: { code: 400, message: `${field}: at most 100 characters` },
      })
    },
  )

  it('takes a messageId of 998 characters, and finds what matches it', async () => {
    const sent = await call(env, 'POST', '/mail/rawsend', {
      raw_email: `From: me@example.org\r\nTo: bob@example.com\r\nMessage-ID: <${long(990)}@x>\r\n\r\nhi\r\n`,
    })
    expect(sent.status).toBe(200)
    const res = await search({ messageId: `<${long(990)}@x>`.slice(0, 998) })
    expect(res.status).toBe(200)
    expect(((await res.json()) as { total: number }).total).toBe(1)
  })

  it('refuses a 10 MB messageId over MCP-sized input before any read, naming the field', () => {
    const result = viewMailLog.input.safeParse({ messageId: long(10 * 1024 * 1024) })
    expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['messageId', 'Too big: expected string to have <=998 characters'],
    ])
  })

  it('refuses rule data past 254 characters with 400, creating no rule', async () => {
    const res = await call(env, 'POST', '/mail/rules', { type: 'startswith', data: long(255) })
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 400,
      body: { code: 400, message: 'data: Too big: expected string to have <=254 characters' },
    })
    expect(await env.services.store.rules.list([env.orderId])).toEqual([])
  })

  it('refuses an attachment filename past 998 characters with 400, queuing nothing', async () => {
    const res = await call(env, 'POST', '/mail/advsend', {
      from: 'me@example.org',
      to: 'bob@example.com',
      subject: 's',
      body: 'x',
      attachments: [{ filename: long(999), data: 'aGk=' }],
    })
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 400,
      body: { code: 400, message: 'attachments.0.filename: Too big: expected string to have <=998 characters' },
    })
    expectNothingQueued(env)
  })
})

// A message sent as it is (rawsend, SMTP) is relayed unchanged; what the log keeps of its header
// is bounded as a header line is, so that no page of the log, search or event carries megabytes.
describe('REST rawsend: what the log keeps of a header', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  it('keeps an 8 MB subject and Message-ID as their first 998 characters, and the message whole', async () => {
    const raw = `From: me@example.org\r\nTo: bob@example.com\r\nSubject: ${WORD}\r\nMessage-ID: <${WORD}@x>\r\n\r\nhi\r\n`
    const res = await call(env, 'POST', '/mail/rawsend', { raw_email: raw })
    expect(res.status).toBe(200)
    const txid = ((await res.json()) as { text: string }).text
    const log = await call(env, 'GET', `/mail/log?mailid=${txid}`)
    const [row] = ((await log.json()) as { emails: { subject: string; messageId: string; bodySize: number }[] }).emails
    expect(row.subject).toBe(WORD.slice(0, 998))
    expect(row.messageId).toBe(`<${WORD}`.slice(0, 998))
    // The message itself went as it came (with the Date line every message gets in front).
    expect(row.bodySize).toBeGreaterThan(raw.length)
  })
})
