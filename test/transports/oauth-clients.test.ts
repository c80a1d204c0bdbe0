import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { TOOLS } from '../../tools/index.js'
import { redirectMatches } from '../../transports/oauth-clients.js'
import { scopeOf } from '../../transports/scopes.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { authorize, authorizeQuery, BASE, exchangeFields, pkce, REDIRECT, token } from './oauth-flow.js'

describe('scopes', () => {
  // The one table of which scope each tool needs, from its annotations.
  it.each([
    ['pingServer', 'mail:read'],
    ['getMailOrders', 'mail:read'],
    ['getMailOrderById', 'mail:read'],
    ['sendMail', 'mail:send'],
    ['sendAdvMail', 'mail:send'],
    ['rawMail', 'mail:send'],
    ['viewMailLog', 'mail:read'],
    ['getStats', 'mail:read'],
    ['getMailBlocks', 'mail:read'],
    ['delistBlock', 'mail:manage'],
    ['getRules', 'mail:read'],
    ['addRule', 'mail:manage'],
    ['deleteRule', 'mail:manage'],
    ['addWebhook', 'mail:manage'],
    ['getWebhooks', 'mail:read'],
    ['deleteWebhook', 'mail:manage'],
  ])('%s needs %s', (name, scope) => {
    expect(scopeOf(TOOLS.find((t) => t.name === name)!)).toBe(scope)
  })

  it('covers every tool', () => {
    expect(TOOLS).toHaveLength(16)
  })
})

describe('redirect URIs', () => {
  it.each([
    [['https://app.example/cb'], 'https://app.example/cb', true],
    [['https://app.example/cb'], 'https://app.example/cb/', false],
    [['https://app.example/cb'], 'https://app.example:8443/cb', false],
    [['http://127.0.0.1/cb'], 'http://127.0.0.1:53000/cb', true],
    [['http://127.0.0.1:4000/cb'], 'http://127.0.0.1:53000/cb', true],
    [['http://localhost:4000/cb'], 'http://localhost:1/cb', true],
    [['http://[::1]/cb'], 'http://[::1]:9/cb', true],
    [['http://127.0.0.1/cb'], 'http://127.0.0.1:53000/other', false],
    [['http://127.0.0.1/cb'], 'http://localhost:53000/cb', false],
    [['cursor://anysphere.cursor-mcp/oauth/callback'], 'cursor://anysphere.cursor-mcp/oauth/callback', true],
  ])('registered %j, given %s: %s', (registered, given, matches) => {
    expect(redirectMatches(registered, given)).toBe(matches)
  })
})

describe('Client ID Metadata Documents', () => {
  let env: TestEnv
  let server: Server
  let requests = 0
  let doc: (url: string) => unknown
  let url: string
  const start = async (allowPrivate: boolean) => {
    env = await createTestEnv({
      MAILROOM_PUBLIC_URL: BASE,
      ...(allowPrivate ? { MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA: 'true' } : {}),
    })
  }
  beforeEach(async () => {
    requests = 0
    doc = (id) => ({ client_id: id, client_name: 'Hosted agent', redirect_uris: [REDIRECT] })
    server = createServer((_req, res) => {
      requests++
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify(doc(url)))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/client.json`
  })
  afterEach(async () => {
    await env.close()
    await new Promise((resolve) => server.close(resolve))
  })

  it('fetches the document of a URL client id and authorizes it, with MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA', async () => {
    await start(true)
    const { verifier, challenge } = pkce()
    const page = await env.app.request(
      `/oauth/authorize?${new URLSearchParams(authorizeQuery({ clientId: url, challenge }))}`,
    )
    expect(await page.text()).toContain(`<strong>Hosted agent</strong> (<code>${url}</code>)`)
    const back = await authorize(env.app, { clientId: url, apiKey: env.apiKey, challenge })
    const res = await token(env.app, exchangeFields(back, verifier, url))
    expect(res.status).toBe(200)
    expect(await env.services.store.oauth.grants(env.accountId)).toEqual([
      expect.objectContaining({ clientId: url, clientName: 'Hosted agent' }),
    ])
  })

  it('refuses a document that names another client or has no usable redirect URI', async () => {
    await start(true)
    for (const [bad, message] of [
      [() => ({ client_id: 'https://else.example/c.json', redirect_uris: [REDIRECT] }), 'names another client_id'],
      [(id: string) => ({ client_id: id, redirect_uris: ['javascript:x'] }), 'has no usable redirect_uris'],
    ] as const) {
      doc = bad
      const res = await env.app.request(
        `/oauth/authorize?${new URLSearchParams(authorizeQuery({ clientId: url, challenge: pkce().challenge }))}`,
      )
      expect(res.status).toBe(400)
      expect(await res.text()).toContain(message)
    }
  })

  it('refuses a client id URL on a private address, or over http, fetching nothing and granting nothing', async () => {
    await start(false)
    const https = url.replace('http:', 'https:')
    for (const [clientId, message] of [
      [https, '127.0.0.1, a loopback address; not fetched (MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA)'],
      [
        'https://10.1.2.3/client.json',
        '10.1.2.3, a private address; not fetched (MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA)',
      ],
      ['https://localhost/client.json', 'localhost is a loopback name; not fetched'],
      [url, `a client id URL must be https: ${url}`],
    ]) {
      const query = authorizeQuery({ clientId, challenge: pkce().challenge })
      const res = await env.app.request(`/oauth/authorize?${new URLSearchParams(query)}`)
      expect(res.status, clientId).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      expect(await res.text()).toContain(message)
      const posted = await env.app.request('/oauth/authorize', {
        method: 'POST',
        body: new URLSearchParams({ ...query, api_key: env.apiKey, decision: 'allow', allow_scope: 'mail:read' }),
      })
      expect(posted.status).toBe(400)
    }
    expect(requests).toBe(0)
    expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
  })
})

describe('authorization requests', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_PUBLIC_URL: BASE })
  })
  afterEach(() => env.close())

  it('sends a request without a PKCE S256 challenge back with invalid_request, granting nothing', async () => {
    const res = await env.app.request('/oauth/register', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [REDIRECT] }),
    })
    const { client_id: clientId } = await res.json()
    const { challenge } = pkce()
    for (const change of [{ code_challenge_method: 'plain' }, { code_challenge: '' }, { response_type: 'token' }]) {
      const query = { ...authorizeQuery({ clientId, challenge }), ...change }
      const answer = await env.app.request(`/oauth/authorize?${new URLSearchParams(query)}`)
      expect(answer.status).toBe(303)
      const back = new URL(answer.headers.get('location')!)
      expect(back.searchParams.get('error')).toBe(
        change.response_type ? 'unsupported_response_type' : 'invalid_request',
      )
      expect(back.searchParams.get('code')).toBeNull()
    }
    expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
  })
})
