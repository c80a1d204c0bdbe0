import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { SqliteStore } from '../../storage/sqlite/index.js'
import { toolCaller } from '../../transports/mcp.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectNothingQueued } from '../tools/support.js'
import { BASE, mcpWithToken, tokensFor } from './oauth-flow.js'

const send = { to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'x' }

// Access tokens at the doors, beyond the authorization itself (test/transports/oauth.test.ts).
describe('OAuth access tokens at the doors', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_PUBLIC_URL: BASE, MAILROOM_HTTP_MAX_AUTH_FAILURES: '3' })
  })
  afterEach(() => env.close())

  it("gives a sandbox key's grant sandbox tokens: what they send is sandbox mail", async () => {
    const { key } = await env.services.store.apiKeys.create(env.accountId, env.clock(), { sandbox: true })
    const t = await tokensFor(env.app, key, { resource: BASE })
    expect(await env.services.store.oauth.grants(env.accountId)).toMatchObject([{ sandbox: true }])
    const res = await env.app.request('/mail/send', {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.access_token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(send),
    })
    expect(res.status).toBe(200)
    const sqlite = (env.services.store as SqliteStore).sqlite
    expect(sqlite.prepare('SELECT sandbox FROM messages').pluck().all()).toEqual([1])
  })

  it('counts unknown tokens with wrong keys: past the limit the address is refused (429), a good token too', async () => {
    const good = await tokensFor(env.app, env.apiKey)
    for (let i = 0; i < 3; i++) {
      const res = await mcpWithToken(env.app, `mra_guess${i}`, { jsonrpc: '2.0', id: 1, method: 'tools/list' })
      expect(res.status).toBe(401)
      expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"')
      expect((await res.json()).message).toBe('the access token is not valid (unknown, or its grant was revoked)')
    }
    const refused = await mcpWithToken(env.app, good.access_token, { jsonrpc: '2.0', id: 1, method: 'tools/list' })
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/)
  })

  it("applies each request's own token in a session: the tools listed and callable follow its scopes", async () => {
    const read = await tokensFor(env.app, env.apiKey, { scope: 'mail:read' })
    const all = await tokensFor(env.app, env.apiKey)
    const rpc = (token: string, message: object, sessionId?: string) =>
      env.app.request('/mcp', {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Mcp-Protocol-Version': '2025-06-18',
          ...(sessionId ? { 'Mcp-Session-Id': sessionId } : {}),
        },
        body: JSON.stringify(message),
      })
    const init = await rpc(read.access_token, {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    })
    const sessionId = init.headers.get('mcp-session-id')!
    await init.text()
    expect(sessionId).toBeTruthy()
    const names = async (token: string) => {
      const res = await rpc(token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, sessionId)
      const text = await res.text()
      const data = JSON.parse(text.slice(text.indexOf('{')))
      return data.result.tools.map((t: { name: string }) => t.name) as string[]
    }
    expect(await names(read.access_token)).not.toContain('sendMail')
    expect(await names(all.access_token)).toContain('sendMail')
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sendMail', arguments: send } }
    expect((await rpc(read.access_token, call, sessionId)).status).toBe(403)
  })

  it('refuses a call outside the scopes in the tool caller itself, whatever the door (stdio, in memory)', async () => {
    const call = toolCaller(env.services)
    const caller = { accountId: env.accountId, origin: '192.0.2.10', scopes: ['mail:read'] }
    expect(await call('sendMail', send, caller)).toEqual({
      isError: true,
      content: [
        {
          type: 'text',
          text: JSON.stringify({
            code: 403,
            message:
              'sendMail needs the mail:send scope, which this access token was not granted; authorize again with it',
          }),
        },
      ],
    })
    expectNothingQueued(env)
    expect((await call('getMailOrders', {}, caller)).isError).toBeUndefined()
  })
})
