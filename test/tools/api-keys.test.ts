import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createApiKey } from '../../tools/create-api-key.js'
import { getApiKeys } from '../../tools/get-api-keys.js'
import { revokeApiKey } from '../../tools/revoke-api-key.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, expectSchemaRefusal, run } from './support.js'

describe('the API key tools', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const stored = () => env.services.store.apiKeys.list(env.accountId)

  it('createApiKey returns a key, shown only then, that works at once; getApiKeys lists it by prefix', async () => {
    const made = await run(createApiKey, {}, env.ctx)
    expect(made).toEqual({ id: 2, key: expect.stringMatching(/^mr_/), prefix: expect.any(String), sandbox: false })
    expect(made.key.startsWith(made.prefix)).toBe(true)
    expect((await call(env, 'GET', '/mail', undefined, { apiKey: made.key })).status).toBe(200)
    const sandbox = await run(createApiKey, { sandbox: true }, env.ctx)
    expect(await env.services.store.apiKeys.owner(sandbox.key)).toMatchObject({
      accountId: env.accountId,
      sandbox: true,
    })
    const listed = await run(getApiKeys, {}, env.ctx)
    expect(listed).toEqual([
      {
        id: 1,
        prefix: expect.any(String),
        sandbox: false,
        created: '2026-11-22 12:00:00',
        revoked: null,
        policy: null,
      },
      { id: 2, prefix: made.prefix, sandbox: false, created: '2026-11-22 12:00:00', revoked: null, policy: null },
      { id: 3, prefix: sandbox.prefix, sandbox: true, created: '2026-11-22 12:00:00', revoked: null, policy: null },
    ])
    expect(JSON.stringify(listed)).not.toContain(made.key)
    expectSchemaRefusal(createApiKey, { sandbox: 'yes' }, 'sandbox')
  })

  it('revokeApiKey revokes a key of the account: it is refused from then on; again is no change', async () => {
    const made = await run(createApiKey, {}, env.ctx)
    env.clock.advance(60_000)
    expect(await run(revokeApiKey, { id: made.id }, env.ctx)).toEqual({ status: 'ok', text: 'record deleted' })
    expect((await call(env, 'GET', '/mail', undefined, { apiKey: made.key })).status).toBe(401)
    expect((await run(getApiKeys, {}, env.ctx))[1]).toMatchObject({ id: made.id, revoked: '2026-11-22 12:01:00' })
    expect(await run(revokeApiKey, { id: made.id }, env.ctx)).toEqual({ status: 'ok', text: 'already revoked' })
  })

  it("another account's key is not found, and stays; a key never outranks the caller's", async () => {
    const other = await env.newAccount()
    const [theirs] = await env.services.store.apiKeys.list(other.accountId)
    await expectRefused(run(revokeApiKey, { id: theirs.id }, env.ctx), 404, `id: API key ${theirs.id} not found`)
    expect(await env.services.store.apiKeys.owner(other.apiKey)).toBeDefined()
    expect(await run(getApiKeys, {}, env.ctx)).toHaveLength(1)

    // A sandbox key makes and revokes sandbox keys only.
    const sandboxCtx = { ...env.ctx, sandbox: true }
    await expectRefused(run(createApiKey, {}, sandboxCtx), 403, 'a sandbox key may create sandbox keys only')
    await expectRefused(run(revokeApiKey, { id: 1 }, sandboxCtx), 403, 'a sandbox key may revoke sandbox keys only')
    expect(await stored()).toEqual([expect.objectContaining({ id: 1, revokedAt: null })])
    const sandbox = await run(createApiKey, { sandbox: true }, sandboxCtx)
    expect(await run(revokeApiKey, { id: sandbox.id }, sandboxCtx)).toMatchObject({ status: 'ok' })

    // An access token may read the keys, never make or revoke one.
    const token = { ...env.ctx, scopes: ['mail:read', 'mail:send', 'mail:manage'] }
    expect(await run(getApiKeys, {}, token)).toHaveLength(2)
    await expectRefused(run(createApiKey, {}, token), 403, 'API keys are managed with an API key, not an access token')
    await expectRefused(run(revokeApiKey, { id: 1 }, token), 403, 'not revoked: API keys are managed with an API key')
    expect((await stored()).map((k) => [k.id, k.revokedAt])).toEqual([
      [1, null],
      [sandbox.id, expect.any(Number)],
    ])
  })
})
