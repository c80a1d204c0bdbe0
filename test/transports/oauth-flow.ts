import { createHash, randomBytes } from 'node:crypto'
import { expect } from 'vitest'
import type { TestEnv } from '../helpers.js'

export const BASE = 'https://mail.example.com'
export const MCP_RESOURCE = `${BASE}/mcp`
export const REDIRECT = 'http://127.0.0.1:4711/callback'

/** A PKCE pair (RFC 7636): a verifier and its S256 challenge. */
export function pkce() {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

/** The app in process (`app.request`), or a running server (see overHttp). */
type App = Pick<TestEnv['app'], 'request'> | { request(path: string, init?: RequestInit): Promise<Response> }

/** A running server as an App: requests over HTTP, redirects not followed. */
export const overHttp = (base: string) => ({
  request: (path: string, init: RequestInit = {}) => fetch(`${base}${path}`, { ...init, redirect: 'manual' }),
})

/** Registers a client by Dynamic Client Registration; answers its client_id. */
export async function register(app: App, redirectUris = [REDIRECT], name = 'Test agent'): Promise<string> {
  const res = await app.request('/oauth/register', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: redirectUris, token_endpoint_auth_method: 'none' }),
  })
  expect(res.status).toBe(201)
  return ((await res.json()) as { client_id: string }).client_id
}

export interface AuthorizeOptions {
  clientId: string
  apiKey: string
  challenge: string
  /** null: left out (the client's only redirect URI is used). */
  redirectUri?: string | null
  resource?: string | null
  scope?: string
  /** The scopes the person leaves ticked; default all asked. */
  allow?: string[]
  state?: string
}

/** The query of an authorization request. */
export function authorizeQuery(o: Omit<AuthorizeOptions, 'apiKey'>): Record<string, string> {
  return {
    response_type: 'code',
    client_id: o.clientId,
    ...(o.redirectUri === null ? {} : { redirect_uri: o.redirectUri ?? REDIRECT }),
    code_challenge: o.challenge,
    code_challenge_method: 'S256',
    state: o.state ?? 'st-1',
    ...(o.resource === null ? {} : { resource: o.resource ?? MCP_RESOURCE }),
    ...(o.scope ? { scope: o.scope } : {}),
  }
}

/** Posts the authorization page's form, as the person's browser would. */
export const postAuthorize = (app: App, fields: Record<string, string | string[]>) => {
  const body = new URLSearchParams()
  for (const [k, v] of Object.entries(fields)) for (const one of [v].flat()) body.append(k, one)
  return app.request('/oauth/authorize', { method: 'POST', body })
}

/**
 * Answers the authorization page as a person would: loads it, signs in with the key, allows.
 * Answers the redirect back to the client, parsed.
 */
export async function authorize(app: App, o: AuthorizeOptions): Promise<URL> {
  const query = authorizeQuery(o)
  const page = await app.request(`/oauth/authorize?${new URLSearchParams(query)}`)
  expect(page.status).toBe(200)
  const consent = await postAuthorize(app, { ...query, api_key: o.apiKey, step: 'sign-in' })
  expect(consent.status).toBe(200)
  const asked = o.scope ? o.scope.split(' ') : ['mail:read', 'mail:send', 'mail:manage']
  const allowed = await postAuthorize(app, {
    ...query,
    api_key: o.apiKey,
    decision: 'allow',
    allow_scope: o.allow ?? asked,
  })
  expect(allowed.status).toBe(303)
  return new URL(allowed.headers.get('location')!)
}

/** The fields of a code's exchange at the token endpoint (`resource` null: left out). */
export function exchangeFields(
  back: URL,
  verifier: string,
  clientId: string,
  resource: string | null = MCP_RESOURCE,
): Record<string, string> {
  return {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    code_verifier: verifier,
    client_id: clientId,
    redirect_uri: `${back.origin}${back.pathname}`,
    ...(resource === null ? {} : { resource }),
  }
}

/** Posts to the token endpoint. */
export const token = (app: App, fields: Record<string, string>) =>
  app.request('/oauth/token', { method: 'POST', body: new URLSearchParams(fields) })

/** The whole flow for a new client: registered, authorized, the code exchanged. Answers the token response. */
export async function tokensFor(
  app: App,
  apiKey: string,
  options: { scope?: string; resource?: string; redirectUri?: string } = {},
): Promise<{ access_token: string; refresh_token: string; scope: string; clientId: string; expires_in: number }> {
  const clientId = await register(app)
  const { verifier, challenge } = pkce()
  const back = await authorize(app, { clientId, apiKey, challenge, ...options })
  const res = await token(app, exchangeFields(back, verifier, clientId, options.resource ?? MCP_RESOURCE))
  expect(res.status).toBe(200)
  return { ...(await res.json()), clientId }
}

/** A JSON-RPC request to /mcp with a bearer token, session-less. */
export const mcpWithToken = (app: App, accessToken: string | null, message: unknown) =>
  app.request('/mcp', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...(accessToken ? { Authorization: `Bearer ${accessToken}` } : {}),
    },
    body: JSON.stringify(message),
  })
