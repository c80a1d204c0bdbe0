import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DEFAULT_POLICY } from '../../storage/store.js'
import { TOOLS } from '../../tools/index.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectNothingQueued } from '../tools/support.js'
import {
  authorize,
  authorizeQuery,
  BASE,
  exchangeFields,
  MCP_RESOURCE,
  mcpWithToken,
  pkce,
  postAuthorize,
  REDIRECT,
  register,
  token,
  tokensFor,
} from './oauth-flow.js'

const toolsList = { jsonrpc: '2.0', id: 1, method: 'tools/list' }
const sendMail = {
  jsonrpc: '2.0',
  id: 2,
  method: 'tools/call',
  params: { name: 'sendMail', arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'x' } },
}

describe('OAuth authorization server', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_PUBLIC_URL: BASE, MAILROOM_OAUTH_REGISTRATIONS_PER_ADDRESS: '5' })
  })
  afterEach(() => env.close())
  const grants = () => env.services.store.oauth.grants(env.accountId)

  it('serves RFC 8414 metadata, and RFC 9728 metadata naming it', async () => {
    const meta = await (await env.app.request('/.well-known/oauth-authorization-server')).json()
    // What the MCP SDK's client reads: the endpoints, PKCE S256, public clients, both registrations.
    expect(meta).toMatchObject({
      issuer: BASE,
      authorization_endpoint: `${BASE}/oauth/authorize`,
      token_endpoint: `${BASE}/oauth/token`,
      registration_endpoint: `${BASE}/oauth/register`,
      response_types_supported: ['code'],
      token_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
    })
    for (const [path, resource] of [
      ['/.well-known/oauth-protected-resource/mcp', MCP_RESOURCE],
      ['/.well-known/oauth-protected-resource', BASE],
    ])
      expect(await (await env.app.request(path)).json()).toMatchObject({
        resource,
        authorization_servers: [BASE],
        bearer_methods_supported: ['header'],
        scopes_supported: ['mail:read', 'mail:send', 'mail:manage'],
      })
  })

  it('says in the server card how to connect with a key and with OAuth', async () => {
    const card = await (await env.app.request('/.well-known/mcp/server.json')).json()
    expect(card.authentication).toEqual({
      required: true,
      schemes: ['apiKey', 'oauth2'],
      apiKey: { in: 'header', name: 'X-API-KEY' },
      oauth2: {
        protectedResourceMetadata: `${BASE}/.well-known/oauth-protected-resource/mcp`,
        authorizationServer: BASE,
        scopes: ['mail:read', 'mail:send', 'mail:manage'],
      },
    })
  })

  it('answers /mcp without credentials 401 with a WWW-Authenticate challenge naming the metadata', async () => {
    const res = await mcpWithToken(env.app, null, toolsList)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp"`,
    )
    expect((await res.json()).message).toMatch(
      /X-API-KEY header \(or as Authorization: Bearer mr_…\), or authorize with OAuth/,
    )
  })

  it('authorizes a client: the page names client, account and scopes; the tokens call MCP as the account', async () => {
    const clientId = await register(env.app)
    const { verifier, challenge } = pkce()
    const query = authorizeQuery({ clientId, challenge })
    const page = await (await env.app.request(`/oauth/authorize?${new URLSearchParams(query)}`)).text()
    expect(page).toContain('<strong>Test agent</strong>')
    expect(page).toContain('<label for="api_key">API key of the account</label>')
    expect(page).toContain(REDIRECT)
    const consent = await postAuthorize(env.app, { ...query, api_key: env.apiKey, step: 'sign-in' })
    expect(consent.headers.get('x-frame-options')).toBe('DENY')
    const html = await consent.text()
    expect(html).toContain('the account <strong>test</strong> (id 1)')
    for (const scope of ['mail:read', 'mail:send', 'mail:manage']) expect(html).toContain(`value="${scope}" checked`)

    const back = await authorize(env.app, { clientId, apiKey: env.apiKey, challenge })
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT)
    expect(back.searchParams.get('state')).toBe('st-1')
    expect(back.searchParams.get('iss')).toBe(BASE)
    const res = await token(env.app, exchangeFields(back, verifier, clientId))
    expect(res.headers.get('cache-control')).toBe('no-store')
    const tokens = await res.json()
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'mail:read mail:send mail:manage' })
    expect(tokens.access_token).toMatch(/^mra_/)
    expect(tokens.refresh_token).toMatch(/^mrr_/)
    const list = await (await mcpWithToken(env.app, tokens.access_token, toolsList)).json()
    expect(list.result.tools).toHaveLength(TOOLS.length)
    const sent = await (await mcpWithToken(env.app, tokens.access_token, sendMail)).json()
    expect(sent.result.structuredContent).toMatchObject({ status: 'ok' })
    expect(await grants()).toEqual([
      expect.objectContaining({ clientId, clientName: 'Test agent', resource: MCP_RESOURCE, sandbox: false }),
    ])
  })

  it("keeps the authorizing key's send policy in the grant: the token's sends are held by it", async () => {
    const { store } = env.services
    const policy = { ...DEFAULT_POLICY, approval: 'always' as const }
    const owner = await store.apiKeys.owner(env.apiKey)
    await store.policies.set({ kind: 'key', id: owner!.keyId! }, policy)
    const tokens = await tokensFor(env.app, env.apiKey)
    const sent = await (await mcpWithToken(env.app, tokens.access_token, sendMail)).json()
    expect(sent.result.structuredContent).toMatchObject({ status: 'held' })
    const [grant] = await grants()
    expect(grant.policy).toEqual(policy)
    expect(await store.holds.get(sent.result.structuredContent.text)).toMatchObject({
      holder: `grant:${grant.id}`,
    })
  })

  it('lists only the tools of the scopes allowed, and refuses a mail:read token calling sendMail (403)', async () => {
    const read = await tokensFor(env.app, env.apiKey, { scope: 'mail:read' })
    expect(read.scope).toBe('mail:read')
    const list = await (await mcpWithToken(env.app, read.access_token, toolsList)).json()
    expect(list.result.tools.map((t: { name: string }) => t.name)).toEqual([
      'pingServer',
      'getMailOrders',
      'getMailOrderById',
      'viewMailLog',
      'getStats',
      'getMailBlocks',
      'getRules',
      'getWebhooks',
      'getMessage',
      'getVolume',
      'getSuppressions',
      'getApiKeys',
      'getDomains',
      'checkDomain',
      'getMessageContent',
      'getInboxes',
      'listInboundMessages',
      'getInboundMessage',
      'getAttachment',
      'getThread',
      'getSendPolicy',
      'getApprovals',
    ])
    const res = await mcpWithToken(env.app, read.access_token, sendMail)
    expect(res.status).toBe(403)
    expect(res.headers.get('www-authenticate')).toMatch(
      /^Bearer error="insufficient_scope", scope="mail:read mail:send", resource_metadata="https:\/\/mail\.example\.com\/\.well-known\/oauth-protected-resource\/mcp"/,
    )
    const body = await res.json()
    expect(body.error.data).toEqual({
      code: 403,
      message: 'sendMail needs the mail:send scope, which this access token was not granted; authorize again with it',
    })
    // A read is fine.
    const log = await (
      await mcpWithToken(env.app, read.access_token, {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'viewMailLog', arguments: {} },
      })
    ).json()
    expect(log.result.isError).toBeUndefined()
    expectNothingQueued(env)
  })

  it('refuses a wrong code_verifier, and the code is spent', async () => {
    const clientId = await register(env.app)
    const { verifier, challenge } = pkce()
    const back = await authorize(env.app, { clientId, apiKey: env.apiKey, challenge })
    const exchange = (code_verifier: string) =>
      token(env.app, {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code')!,
        code_verifier,
        client_id: clientId,
        redirect_uri: REDIRECT,
        resource: MCP_RESOURCE,
      })
    const res = await exchange(pkce().verifier)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      error: 'invalid_grant',
      error_description: 'the code_verifier does not match the code_challenge (PKCE)',
    })
    expect(await grants()).toEqual([])
    expect((await (await exchange(verifier)).json()).error).toBe('invalid_grant')
    expect(await grants()).toEqual([])
  })

  it('requires redirect_uri at the token endpoint when the authorization request named one', async () => {
    const clientId = await register(env.app)
    const { verifier, challenge } = pkce()
    const back = await authorize(env.app, { clientId, apiKey: env.apiKey, challenge })
    const { redirect_uri: _, ...fields } = exchangeFields(back, verifier, clientId)
    const res = await token(env.app, fields)
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      error: 'invalid_request',
      error_description: 'redirect_uri is required: the authorization request named one',
    })
    expect(await grants()).toEqual([])
    // The code is spent: with the redirect_uri now, it is a reuse.
    const again = await token(env.app, exchangeFields(back, verifier, clientId))
    expect((await again.json()).error_description).toBe('the code was used already: the grant made with it is revoked')
    expect(await grants()).toEqual([])
    // A request that named none (the client's only one was used) needs none (RFC 6749 §4.1.3).
    const second = pkce()
    const unnamed = await authorize(env.app, {
      clientId,
      apiKey: env.apiKey,
      challenge: second.challenge,
      redirectUri: null,
    })
    expect(`${unnamed.origin}${unnamed.pathname}`).toBe(REDIRECT)
    const { redirect_uri: __, ...bare } = exchangeFields(unnamed, second.verifier, clientId)
    expect((await token(env.app, bare)).status).toBe(200)
    expect(await grants()).toHaveLength(1)
  })

  it('refuses a missing or foreign resource, at the authorization and at the token endpoint', async () => {
    const clientId = await register(env.app)
    const { verifier, challenge } = pkce()
    for (const [resource, description] of [
      [null, `resource is required (RFC 8707): ${BASE} or ${MCP_RESOURCE}`],
      [
        'https://other.example/mcp',
        `https://other.example/mcp is not a resource of this server: ${BASE} or ${MCP_RESOURCE}`,
      ],
    ] as const) {
      const res = await env.app.request(
        `/oauth/authorize?${new URLSearchParams(authorizeQuery({ clientId, challenge, resource }))}`,
      )
      expect(res.status).toBe(303)
      const back = new URL(res.headers.get('location')!)
      expect(Object.fromEntries(back.searchParams)).toEqual({
        error: 'invalid_target',
        error_description: description,
        state: 'st-1',
        iss: BASE,
      })
      // Signing in and allowing anyway changes nothing: the form is checked again.
      const allowed = await postAuthorize(env.app, {
        ...authorizeQuery({ clientId, challenge, resource }),
        api_key: env.apiKey,
        decision: 'allow',
        allow_scope: 'mail:read',
      })
      expect(new URL(allowed.headers.get('location')!).searchParams.get('error')).toBe('invalid_target')
    }
    const back = await authorize(env.app, { clientId, apiKey: env.apiKey, challenge })
    const fields = exchangeFields(back, verifier, clientId, null)
    for (const [extra, description] of [
      [{}, `resource is required (RFC 8707): ${BASE} or ${MCP_RESOURCE}`],
      [{ resource: 'https://other.example/mcp' }, 'https://other.example/mcp is not a resource of this server'],
    ] as const) {
      const res = await token(env.app, { ...fields, ...extra })
      expect(res.status).toBe(400)
      expect(await res.json()).toEqual({ error: 'invalid_target', error_description: description })
    }
    // The whole API is a resource too, but not the one this code was issued for.
    const res = await token(env.app, { ...fields, resource: BASE })
    expect(await res.json()).toEqual({
      error: 'invalid_target',
      error_description: `the code was issued for ${MCP_RESOURCE}, not ${BASE}`,
    })
    expect(await grants()).toEqual([])
  })

  it('refuses a redirect URI the client did not register, on a page and without redirecting', async () => {
    const clientId = await register(env.app)
    const { challenge } = pkce()
    for (const redirectUri of [
      'https://evil.example/callback',
      'http://127.0.0.1:4711/other',
      'http://10.0.0.1:4711/callback',
    ]) {
      const query = authorizeQuery({ clientId, challenge, redirectUri })
      const res = await env.app.request(`/oauth/authorize?${new URLSearchParams(query)}`)
      expect(res.status).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      expect(await res.text()).toContain(`${redirectUri} is not a redirect URI of this client`)
      const posted = await postAuthorize(env.app, {
        ...query,
        api_key: env.apiKey,
        decision: 'allow',
        allow_scope: 'mail:read',
      })
      expect(posted.status).toBe(400)
      expect(posted.headers.get('location')).toBeNull()
    }
    // A loopback redirect with another port is the same redirect (RFC 8252 §7.3).
    const back = await authorize(env.app, {
      clientId,
      apiKey: env.apiKey,
      challenge,
      redirectUri: 'http://127.0.0.1:5999/callback',
    })
    expect(back.host).toBe('127.0.0.1:5999')
    expect(back.searchParams.get('code')).toMatch(/^mrc_/)
  })

  it('refuses a reused code, and revokes the grant made with it', async () => {
    const clientId = await register(env.app)
    const { verifier, challenge } = pkce()
    const back = await authorize(env.app, { clientId, apiKey: env.apiKey, challenge })
    const fields = exchangeFields(back, verifier, clientId)
    const first = await (await token(env.app, fields)).json()
    expect((await mcpWithToken(env.app, first.access_token, toolsList)).status).toBe(200)
    const again = await token(env.app, fields)
    expect(again.status).toBe(400)
    expect(await again.json()).toEqual({
      error: 'invalid_grant',
      error_description: 'the code was used already: the grant made with it is revoked',
    })
    expect(await grants()).toEqual([])
    const res = await mcpWithToken(env.app, first.access_token, toolsList)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"')
  })

  it('rotates refresh tokens; a refresh token used twice revokes the grant', async () => {
    const first = await tokensFor(env.app, env.apiKey)
    const refresh = (refresh_token: string) =>
      token(env.app, { grant_type: 'refresh_token', refresh_token, client_id: first.clientId, resource: MCP_RESOURCE })
    const second = await (await refresh(first.refresh_token)).json()
    expect(second.refresh_token).not.toBe(first.refresh_token)
    expect((await mcpWithToken(env.app, second.access_token, toolsList)).status).toBe(200)
    const reused = await refresh(first.refresh_token)
    expect(reused.status).toBe(400)
    expect(await reused.json()).toEqual({
      error: 'invalid_grant',
      error_description: 'the refresh token was used already: the grant is revoked, authorize again',
    })
    expect(await grants()).toEqual([])
    for (const access of [first.access_token, second.access_token])
      expect((await mcpWithToken(env.app, access, toolsList)).status).toBe(401)
    expect((await (await refresh(second.refresh_token)).json()).error).toBe('invalid_grant')
  })

  it("answers a token of one account asking for another's records 404, as a key does", async () => {
    const other = await env.newAccount()
    const { access_token } = await tokensFor(env.app, env.apiKey, { resource: BASE })
    const res = await env.app.request(`/mail/${other.orderId}`, {
      headers: { Authorization: `Bearer ${access_token}` },
    })
    expect(res.status).toBe(404)
    expect(await res.json()).toEqual({ code: 404, message: `id: mail order ${other.orderId} not found` })
    const own = await env.app.request(`/mail/${env.orderId}`, { headers: { Authorization: `Bearer ${access_token}` } })
    expect(own.status).toBe(200)
  })

  it('takes bearer tokens over REST with the same scopes: 403 in the API error shape, nothing sent', async () => {
    const read = await tokensFor(env.app, env.apiKey, { scope: 'mail:read', resource: BASE })
    const auth = { Authorization: `Bearer ${read.access_token}` }
    expect((await env.app.request('/mail', { headers: auth })).status).toBe(200)
    const res = await env.app.request('/mail/send', {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'x' }),
    })
    expect(res.status).toBe(403)
    expect(await res.json()).toEqual({
      code: 403,
      message: 'sendMail needs the mail:send scope, which this access token was not granted; authorize again with it',
    })
    expect(res.headers.get('www-authenticate')).toContain('error="insufficient_scope", scope="mail:send"')
    expectNothingQueued(env)
    // A token bound to MCP is not one for REST (RFC 8707).
    const mcpOnly = await tokensFor(env.app, env.apiKey)
    const refused = await env.app.request('/mail', { headers: { Authorization: `Bearer ${mcpOnly.access_token}` } })
    expect(refused.status).toBe(401)
    expect((await refused.json()).message).toBe(`the access token is for ${MCP_RESOURCE}, not this endpoint (${BASE})`)
  })

  it('refuses an expired access token (401 invalid_token), and the refresh token still works', async () => {
    const t = await tokensFor(env.app, env.apiKey)
    env.clock.advance(3600_000)
    const res = await mcpWithToken(env.app, t.access_token, sendMail)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp", error="invalid_token"`,
    )
    expect((await res.json()).message).toBe('the access token expired: refresh it')
    expectNothingQueued(env)
    const renewed = await token(env.app, {
      grant_type: 'refresh_token',
      refresh_token: t.refresh_token,
      client_id: t.clientId,
      resource: MCP_RESOURCE,
    })
    expect((await mcpWithToken(env.app, (await renewed.json()).access_token, toolsList)).status).toBe(200)
  })

  it('denies: back to the client with access_denied, nothing granted', async () => {
    const clientId = await register(env.app)
    const query = authorizeQuery({ clientId, challenge: pkce().challenge })
    const res = await postAuthorize(env.app, { ...query, decision: 'deny' })
    expect(res.status).toBe(303)
    expect(new URL(res.headers.get('location')!).searchParams.get('error')).toBe('access_denied')
    expect(await grants()).toEqual([])
  })

  it('refuses a wrong API key on the page (401), counted with the wrong keys of the API', async () => {
    const clientId = await register(env.app)
    const query = authorizeQuery({ clientId, challenge: pkce().challenge })
    const res = await postAuthorize(env.app, {
      ...query,
      api_key: 'mr_wrong',
      decision: 'allow',
      allow_scope: 'mail:read',
    })
    expect(res.status).toBe(401)
    expect(await res.text()).toContain('That is not a live API key of an account here.')
    expect(res.headers.get('location')).toBeNull()
    expect(await grants()).toEqual([])
  })

  it('limits registrations per address, storing nothing past the limit', async () => {
    for (let i = 0; i < 5; i++) await register(env.app)
    const res = await env.app.request('/oauth/register', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [REDIRECT] }),
    })
    expect(res.status).toBe(429)
    expect(res.headers.get('retry-after')).toBe('3600')
    expect((await res.json()).error).toBe('temporarily_unavailable')
    env.clock.advance(3600_001)
    await register(env.app)
  })

  it('refuses redirect URIs with a fragment, even empty, or a scheme the browser itself answers', async () => {
    for (const [uri, description] of [
      ['https://app.example/cb#', 'https://app.example/cb# has a fragment, which a redirect URI may not have'],
      ['https://app.example/cb#x', 'https://app.example/cb#x has a fragment, which a redirect URI may not have'],
      [
        'view-source:https://app.example/cb',
        'view-source:https://app.example/cb: view-source: is not a scheme a redirect may use',
      ],
      [
        'VIEW-SOURCE:https://app.example/cb',
        'VIEW-SOURCE:https://app.example/cb: view-source: is not a scheme a redirect may use',
      ],
      ['data:text/html,hi', 'data:text/html,hi: data: is not a scheme a redirect may use'],
    ]) {
      const res = await env.app.request('/oauth/register', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ redirect_uris: [REDIRECT, uri] }),
      })
      expect(res.status, uri).toBe(400)
      expect(await res.json()).toEqual({
        error: 'invalid_redirect_uri',
        error_description: expect.stringContaining(description),
      })
    }
    // Nothing was stored: the address may still register its 5 clients.
    for (let i = 0; i < 5; i++) await register(env.app)
  })

  it('refuses registrations it cannot use', async () => {
    for (const [body, error] of [
      [{}, 'invalid_redirect_uri'],
      [{ redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: [REDIRECT], grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
    ] as const) {
      const res = await env.app.request('/oauth/register', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect((await res.json()).error).toBe(error)
    }
  })
})
