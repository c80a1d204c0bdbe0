import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { rawMail } from '../../tools/raw-mail.js'
import { sendMail } from '../../tools/send-mail.js'
import {
  checkIdempotencyKey,
  fingerprintOf,
  IDEMPOTENCY_STALE_MS,
  IDEMPOTENCY_WINDOW_MS,
} from '../../tools/idempotency.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { expectNothingQueued, storedCounts } from './support.js'

const MAIL = { to: 'bob@example.com', from: 'me@example.org', subject: 'Invoice 42', body: 'Attached.' }
const RULE = 'a key is 1 to 255 printable ASCII characters'

describe('checkIdempotencyKey', () => {
  it.each([
    ['8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['"8e03978e-40d5-43e8-bc93-6894a57f9324"'],
    ['a'],
    ['x'.repeat(255)],
    [' !~ inner spaces and punctuation {}'],
  ])('takes %j as it is', (key) => {
    expect(checkIdempotencyKey('Idempotency-Key', key)).toBe(key)
  })

  it.each([
    ['', `Idempotency-Key: is empty; ${RULE}`],
    ['x'.repeat(256), `Idempotency-Key: is 256 characters long; ${RULE}`],
    ['a\tb', `Idempotency-Key: holds U+0009 at position 2; ${RULE}`],
    ['ab\x01', `Idempotency-Key: holds U+0001 at position 3; ${RULE}`],
    ['\x7f', `Idempotency-Key: holds U+007F at position 1; ${RULE}`],
    ['clé', `Idempotency-Key: holds U+00E9 at position 3; ${RULE}`],
    [42, `Idempotency-Key: expected a string; ${RULE}`],
    [null, `Idempotency-Key: expected a string; ${RULE}`],
  ])('refuses %j with a 400 naming the field', (key, message) => {
    expect(() => checkIdempotencyKey('Idempotency-Key', key)).toThrow(
      expect.objectContaining({ code: 400, message }) as Error,
    )
  })
})

describe('fingerprintOf', () => {
  it('is the same for the same input whatever the order of its fields, and differs by tool and input', () => {
    const a = fingerprintOf(sendMail, { to: ['a@example.com'], from: 'me@example.org', subject: 's', body: 'b' })
    const b = fingerprintOf(sendMail, { body: 'b', subject: 's', from: 'me@example.org', to: ['a@example.com'] })
    expect(a).toBe(b)
    expect(a).toMatch(/^[0-9a-f]{64}$/)
    expect(
      fingerprintOf(sendMail, { to: ['a@example.com'], from: 'me@example.org', subject: 's', body: 'c' }),
    ).not.toBe(a)
    expect(fingerprintOf(rawMail, { to: ['a@example.com'], from: 'me@example.org', subject: 's', body: 'b' })).not.toBe(
      a,
    )
    expect(fingerprintOf(sendMail, { to: 'a@example.com', from: 'me@example.org', subject: 's', body: 'b' })).not.toBe(
      a,
    )
  })
})

describe('Idempotency-Key over REST', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const send = (key: string | null, body: Record<string, unknown> = MAIL, apiKey = env.apiKey, path = '/mail/send') =>
    env.app.request(path, {
      method: 'POST',
      headers: {
        'X-API-KEY': apiKey,
        'Content-Type': 'application/json',
        ...(key === null ? {} : { 'Idempotency-Key': key }),
      },
      body: JSON.stringify(body),
    })

  it('answers a repeat with the first response, and sends nothing more', async () => {
    const first = await send('k-1')
    expect(first.status).toBe(200)
    const answer = await first.json()
    env.clock.advance(IDEMPOTENCY_WINDOW_MS - 1)
    const again = await send('k-1')
    expect(again.status).toBe(200)
    expect(await again.json()).toEqual(answer)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('takes the same request sent as a form for a repeat of the JSON one', async () => {
    const answer = await (await send('k-form')).json()
    const form = await env.app.request('/mail/send', {
      method: 'POST',
      headers: { 'X-API-KEY': env.apiKey, 'Idempotency-Key': 'k-form' },
      body: new URLSearchParams({ subject: MAIL.subject, body: MAIL.body, from: MAIL.from, to: MAIL.to }),
    })
    expect(await form.json()).toEqual(answer)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('refuses the key with a different body or another send with a 422, sending nothing', async () => {
    await send('k-2')
    for (const res of [
      await send('k-2', { ...MAIL, subject: 'Invoice 43' }),
      await send(
        'k-2',
        { raw_email: 'From: me@example.org\r\nTo: bob@example.com\r\n\r\nhi\r\n' },
        env.apiKey,
        '/mail/rawsend',
      ),
    ]) {
      expect(res.status).toBe(422)
      expect(await res.json()).toEqual({
        code: 422,
        message:
          'idempotency key: already used within 24 hours for a different request (another tool or other input); use a new key for a new request',
      })
    }
    expect(storedCounts(env).messages).toBe(1)
  })

  it('does not remember a refusal: the corrected request runs under the same key', async () => {
    const wrong = await send('k-3', { ...MAIL, id: 999 })
    expect(wrong.status).toBe(404)
    const invalid = await send('k-3', { ...MAIL, to: 'not an address' })
    expect(invalid.status).toBe(400)
    expectNothingQueued(env)
    const right = await send('k-3')
    expect(right.status).toBe(200)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('frees the key after a failure (500), so that the retry sends', async () => {
    const enqueue = vi.spyOn(env.services.store.mail, 'enqueue').mockRejectedValueOnce(new Error('disk gone'))
    expect((await send('k-4')).status).toBe(500)
    expectNothingQueued(env)
    expect((await send('k-4')).status).toBe(200)
    expect(enqueue).toHaveBeenCalledTimes(2)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('answers 409 while the first request is pending, and lets a retry run once the pending one is stale', async () => {
    // A request with the key that never finished (its process died after claiming it).
    const now = env.clock()
    const input = sendMail.input.parse(MAIL)
    await env.services.store.idempotency.begin({
      accountId: env.accountId,
      key: 'k-5',
      token: 'dead',
      fingerprint: fingerprintOf(sendMail, input),
      now,
      expiredBefore: now - IDEMPOTENCY_WINDOW_MS,
      staleBefore: now - IDEMPOTENCY_STALE_MS,
    })
    const busy = await send('k-5')
    expect(busy.status).toBe(409)
    expect(busy.headers.get('retry-after')).toBe('1')
    expect((await busy.json()).message).toMatch(
      /^idempotency key: the first request with this key is still being processed/,
    )
    env.clock.advance(IDEMPOTENCY_STALE_MS)
    expect((await send('k-5')).status).toBe(409)
    expectNothingQueued(env)
    env.clock.advance(1)
    expect((await send('k-5')).status).toBe(200)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('sends again under a key more than a day old', async () => {
    const first = await (await send('k-6')).json()
    env.clock.advance(IDEMPOTENCY_WINDOW_MS)
    expect(await (await send('k-6')).json()).toEqual(first)
    env.clock.advance(1)
    const later = await (await send('k-6')).json()
    expect(later.text).not.toBe(first.text)
    expect(storedCounts(env).messages).toBe(2)
  })

  it('keeps each account its own keys', async () => {
    const other = await env.newAccount()
    const ours = await (await send('shared')).json()
    const theirs = await send('shared', { ...MAIL, subject: 'Theirs' }, other.apiKey)
    expect(theirs.status).toBe(200)
    expect((await theirs.json()).text).not.toBe(ours.text)
    expect(await (await send('shared')).json()).toEqual(ours)
    expect(storedCounts(env).messages).toBe(2)
  })

  it.each([
    ['empty', '', 'is empty'],
    ['256 characters', 'k'.repeat(256), 'is 256 characters long'],
    ['a control character', 'k\x01y', 'holds U+0001 at position 2'],
    ['a tab', 'k\ty', 'holds U+0009 at position 2'],
  ])('refuses a key that is %s with a 400 naming the header, sending nothing', async (_, key, what) => {
    const res = await send(key)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ code: 400, message: `Idempotency-Key: ${what}; ${RULE}` })
    expectNothingQueued(env)
  })

  it('is read by the three sends only; other routes ignore it', async () => {
    const adv = await send(
      'k-7',
      { from: MAIL.from, to: MAIL.to, subject: 'adv', body: 'b' },
      env.apiKey,
      '/mail/advsend',
    )
    expect(
      await (
        await send('k-7', { from: MAIL.from, to: MAIL.to, subject: 'adv', body: 'b' }, env.apiKey, '/mail/advsend')
      ).json(),
    ).toEqual(await adv.json())
    const rule = await call(env, 'POST', '/mail/rules', { type: 'domain', data: 'spam.example' })
    expect(rule.status).toBe(200)
    const withKey = await send('', { type: 'domain', data: 'spam2.example' }, env.apiKey, '/mail/rules')
    expect(withKey.status).toBe(200)
    expect(storedCounts(env).messages).toBe(1)
  })
})
