import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
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
