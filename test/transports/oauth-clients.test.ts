import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { createServer, get as httpGet, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { TOOLS } from '../../tools/index.js'
import { createAuth } from '../../transports/auth.js'
import { mountOAuth } from '../../transports/oauth.js'
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
    ['getMessage', 'mail:read'],
    ['getVolume', 'mail:read'],
    ['rotateOrderPassword', 'mail:manage'],
    ['getSuppressions', 'mail:read'],
    ['createMailOrder', 'mail:manage'],
    ['cancelMailOrder', 'mail:manage'],
    ['getApiKeys', 'mail:read'],
    ['createApiKey', 'mail:manage'],
    ['revokeApiKey', 'mail:manage'],
    ['getDomains', 'mail:read'],
    ['checkDomain', 'mail:read'],
    ['getMessageContent', 'mail:read'],
    ['setDomainReceiving', 'mail:manage'],
    ['addInbox', 'mail:manage'],
    ['getInboxes', 'mail:read'],
    ['deleteInbox', 'mail:manage'],
    ['listInboundMessages', 'mail:read'],
    ['getInboundMessage', 'mail:read'],
    ['getAttachment', 'mail:read'],
    ['getThread', 'mail:read'],
    ['markInboundRead', 'mail:manage'],
    ['replyToMessage', 'mail:send'],
    ['getSendPolicy', 'mail:read'],
    ['getApprovals', 'mail:read'],
    ['approveMessage', 'mail:manage'],
    ['rejectMessage', 'mail:manage'],
  ])('%s needs %s', (name, scope) => {
    expect(scopeOf(TOOLS.find((t) => t.name === name)!)).toBe(scope)
  })

  it('covers every tool', () => {
    expect(TOOLS).toHaveLength(42)
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
      [(id: string) => ({ client_id: id, redirect_uris: [`${REDIRECT}#`] }), 'has no usable redirect_uris'],
      [(id: string) => ({ client_id: id, redirect_uris: [`view-source:${REDIRECT}`] }), 'has no usable redirect_uris'],
    ] as const) {
      doc = bad
      const res = await env.app.request(
        `/oauth/authorize?${new URLSearchParams(authorizeQuery({ clientId: url, challenge: pkce().challenge }))}`,
      )
      expect(res.status).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      expect(await res.text()).toContain(message)
    }
    expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
  })

  it('refuses a client id URL on a private address, or over http, fetching nothing and granting nothing', async () => {
    await start(false)
    const https = url.replace('http:', 'https:')
    // What an address is stays in the server's log: the page says only that nothing could be fetched.
    const notFetched = (id: string) => `the client&#39;s metadata document could not be fetched: ${id}`
    for (const [clientId, message] of [
      [https, notFetched(https)],
      ['https://10.1.2.3/client.json', notFetched('https://10.1.2.3/client.json')],
      ['https://localhost/client.json', notFetched('https://localhost/client.json')],
      [url, `a client id URL must be https: ${url}`],
    ]) {
      const query = authorizeQuery({ clientId, challenge: pkce().challenge })
      const res = await env.app.request(`/oauth/authorize?${new URLSearchParams(query)}`)
      expect(res.status, clientId).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      const page = await res.text()
      expect(page).toContain(message)
      expect(page).not.toMatch(/loopback|private/)
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

describe('Client ID Metadata Documents from a server that trickles', () => {
  let env: TestEnv
  let trickler: Server
  let url: string
  let lines: Record<string, unknown>[]
  /** The trickling server's connections: opened, and closed by the other side. */
  const seen = { opened: 0, closed: 0 }
  /** /oauth/authorize over real HTTP, its document's fetch given `deadlineMs` in all. */
  const authorizeServer = async (deadlineMs: number) => {
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    const services = { ...env.services, logger }
    const app = new Hono()
    mountOAuth(app, services, createAuth(services).signIn, { clientMetadataDeadlineMs: deadlineMs })
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 })
    await new Promise((r) => server.once('listening', r))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return { base, close: () => new Promise((r) => server.close(r)) }
  }
  const query = () => new URLSearchParams(authorizeQuery({ clientId: url, challenge: pkce().challenge }))
  const waitFor = async (done: () => boolean) => {
    while (!done()) await new Promise((r) => setTimeout(r, 50))
  }

  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_PUBLIC_URL: BASE, MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA: 'true' })
    lines = []
    seen.opened = seen.closed = 0
    // Answers at once, then one byte a second, never the end: no pause ever reaches an idle timeout.
    trickler = createServer((req, res) => {
      seen.opened++
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{')
      const drip = setInterval(() => res.write(' '), 1000)
      req.socket.on('close', () => {
        clearInterval(drip)
        seen.closed++
      })
    })
    await new Promise<void>((resolve) => trickler.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(trickler.address() as AddressInfo).port}/client.json`
  })
  afterEach(async () => {
    trickler.closeAllConnections()
    await new Promise((resolve) => trickler.close(resolve))
    await env.close()
  })

  it('refuses the request once the whole fetch passes its deadline, and closes the fetch', async () => {
    const server = await authorizeServer(1500)
    try {
      const res = await fetch(`${server.base}/oauth/authorize?${query()}`)
      expect(res.status).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      expect(await res.text()).toContain(`the client&#39;s metadata document could not be fetched: ${url}`)
      await waitFor(() => seen.closed === 1)
      expect(lines).toContainEqual(
        expect.objectContaining({ clientId: url, reason: 'no complete answer within 1.5 s' }),
      )
      expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
    } finally {
      await server.close()
    }
  })

  it('closes the fetch when the authorization request is abandoned', async () => {
    // A deadline no test waits for: only the abandoned request can close the fetch.
    const server = await authorizeServer(3_600_000)
    try {
      const req = httpGet(`${server.base}/oauth/authorize?${query()}`)
      req.on('error', () => {})
      await waitFor(() => seen.opened === 1)
      req.destroy()
      await waitFor(() => seen.closed === 1)
      await waitFor(() => lines.some((l) => l.reason === 'the authorization request was abandoned'))
      expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
    } finally {
      await server.close()
    }
  })
})
