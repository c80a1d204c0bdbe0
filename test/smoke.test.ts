import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { call, createTestEnv, type TestEnv } from './helpers.js'

describe('smoke', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  it('sends and reads the log back', async () => {
    const res = await call(env, 'POST', '/mail/send', {
      to: 'bob@example.com',
      from: 'me@example.org',
      subject: 's',
      body: 'b',
    })
    expect(res.status).toBe(200)
    const { text } = await res.json()
    const log = await (await call(env, 'GET', `/mail/log?mailid=${text}`)).json()
    expect(log.total).toBe(1)
    expect(log.emails[0].id).toBe(text)
  })
})
