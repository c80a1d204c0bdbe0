import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { pingServer } from '../../tools/ping-server.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { run } from './support.js'

describe('pingServer', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  it('answers "Server is up and running"', async () => {
    const result = await run(pingServer, {}, env.ctx)
    expect(result).toBe('Server is up and running')
    expect(pingServer.output.parse(result)).toBe('Server is up and running')
  })

  it('needs no account: it answers a caller without an API key', async () => {
    expect(pingServer.public).toBe(true)
    expect(await run(pingServer, {}, { ...env.ctx, accountId: null })).toBe('Server is up and running')
  })

  it('ignores unexpected input fields', async () => {
    expect(await run(pingServer, { verbose: true }, env.ctx)).toBe('Server is up and running')
  })
})
