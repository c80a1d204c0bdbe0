import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { SqliteStore } from '../../storage/sqlite/index.js'
import { TOOLS } from '../../tools/index.js'
import { createServedTestEnv, mcpPost, type TestEnv } from '../helpers.js'
import { expectNothingQueued } from '../tools/support.js'
import { BASE, mcpWithToken, overHttp, tokensFor } from './oauth-flow.js'

const WRONG = 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'
const send = { to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'hello' }
const toolsList = { jsonrpc: '2.0', id: 1, method: 'tools/list' }

// Most mail APIs take their key as `Authorization: Bearer …`: an API key there is the key it is in
// X-API-KEY, at both doors, and an OAuth access token there is still a token.
describe('an API key as a bearer token', () => {
  let env: TestEnv & { base: string }
  const clients: Client[] = []
  beforeEach(async () => {
    env = await createServedTestEnv({ MAILROOM_PUBLIC_URL: BASE, MAILROOM_HTTP_MAX_AUTH_FAILURES: '3' })
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
    await env.close()
  })

  const rest = (path: string, headers: Record<string, string>, body?: object) =>
    fetch(`${env.base}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body && JSON.stringify(body),
    })
  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` })
  const sandboxOf = () =>
    (env.services.store as SqliteStore).sqlite.prepare('SELECT sandbox FROM messages').pluck().all()

  it('REST: answers as X-API-KEY does, and a sandbox key there sends sandbox mail', async () => {
    const byBearer = await rest('/mail', bearer(env.apiKey))
    expect(byBearer.status).toBe(200)
    expect(await byBearer.json()).toEqual(await (await rest('/mail', { 'X-API-KEY': env.apiKey })).json())
    const { key } = await env.services.store.apiKeys.create(env.accountId, env.clock(), { sandbox: true })
    const sent = await rest('/mail/send', bearer(key), send)
    expect(sent.status).toBe(200)
    expect(sandboxOf()).toEqual([1])
  })

  it('REST: refuses a wrong key there exactly as in X-API-KEY, sends nothing, and counts it', async () => {
    const inHeader = await rest('/mail/send', { 'X-API-KEY': WRONG }, send)
    const asBearer = await rest('/mail/send', bearer(WRONG), send)
    expect(asBearer.status).toBe(401)
    expect(await asBearer.json()).toEqual({ code: 401, message: 'API key is missing or invalid' })
    expect(await inHeader.json()).toEqual({ code: 401, message: 'API key is missing or invalid' })
    expect(asBearer.headers.get('www-authenticate')).toBe(inHeader.headers.get('www-authenticate'))
    expectNothingQueued(env)
    // The third wrong key (two as bearer tokens, one in X-API-KEY) starts the throttle: a right key is refused too.
    expect((await rest('/mail', bearer(WRONG))).status).toBe(401)
    const throttled = await rest('/mail', bearer(env.apiKey))
    expect(throttled.status).toBe(429)
    expect((await throttled.json()).message).toMatch(/^too many wrong API keys from this address/)
  })

  it('MCP: the SDK client with the key as a bearer token lists and calls every tool as the account', async () => {
    const client = new Client({ name: 'agent', version: '1' })
    const transport = new StreamableHTTPClientTransport(new URL(`${env.base}/mcp`), {
      requestInit: { headers: bearer(env.apiKey) },
    })
    await client.connect(transport)
    clients.push(client)
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    const result = await client.callTool({ name: 'sendMail', arguments: send })
    expect(result.isError).toBeUndefined()
    expect(result.structuredContent).toEqual({ status: 'ok', text: expect.stringMatching(/^[0-9a-f]{18}$/) })
    expect(sandboxOf()).toEqual([0])
  })

  it('MCP: refuses a wrong key there exactly as in X-API-KEY; an OAuth token there still works', async () => {
    const http = overHttp(env.base)
    const asBearer = await mcpWithToken(http, WRONG, toolsList)
    const inHeader = await mcpPost(`${env.base}/mcp`, { 'X-API-KEY': WRONG }, toolsList)
    expect(asBearer.status).toBe(401)
    const refusal = await asBearer.json()
    expect(refusal).toEqual(await inHeader.json())
    expect(refusal.message).toMatch(/^API key is missing or invalid: send it in the X-API-KEY header/)
    expect(asBearer.headers.get('www-authenticate')).toBe(inHeader.headers.get('www-authenticate'))

    const { access_token } = await tokensFor(http, env.apiKey, { scope: 'mail:read' })
    const listed = await mcpWithToken(http, access_token, toolsList)
    expect(listed.status).toBe(200)
    const names = ((await listed.json()).result.tools as { name: string }[]).map((t) => t.name)
    expect(names).toContain('viewMailLog')
    expect(names).not.toContain('sendMail')
  })
})
