import type { Context, Hono } from 'hono'
import { createHash, randomBytes } from 'node:crypto'
import { MailroomError } from '../errors.js'
import { createResolver } from '../relay/routes.js'
import { hashApiKey } from '../storage/secrets.js'
import type { OAuthCode, OAuthTokenHashes } from '../storage/store.js'
import type { Services } from '../tools/define.js'
import type { SignIn } from './auth.js'
import { PAGE_HEADERS } from './documents.js'
import { ClientProblem, type ClientInfo, redirectMatches, resolveClient } from './oauth-clients.js'
import { AUTHORIZE_PARAMS, type AuthorizeParams, consentPage, problemPage, signInPage } from './oauth-page.js'
import { mountRegistration } from './oauth-register.js'
import { mountToken } from './oauth-token.js'
import { SCOPE_NAMES, type Scope } from './scopes.js'

/** How long an authorization code can be exchanged (RFC 6749 §4.1.2 recommends at most 10 minutes). */
export const CODE_TTL_MS = 10 * 60_000
/** A registered client that has no grant this long after it registered is removed by the housekeeping. */
export const UNUSED_CLIENT_MS = 86_400_000

/** The paths of the authorization server's endpoints. */
export const OAUTH_PATHS = { authorize: '/oauth/authorize', token: '/oauth/token', register: '/oauth/register' }

/** The resource indicators (RFC 8707) tokens can be bound to: the whole API (REST and MCP), or MCP alone. */
export const resourcesOf = (publicUrl: string) => [publicUrl, `${publicUrl}/mcp`]

/** RFC 8414 authorization server metadata: mailroom is its own authorization server. */
export function authorizationServerMetadata(publicUrl: string) {
  return {
    issuer: publicUrl,
    authorization_endpoint: `${publicUrl}${OAUTH_PATHS.authorize}`,
    token_endpoint: `${publicUrl}${OAUTH_PATHS.token}`,
    registration_endpoint: `${publicUrl}${OAUTH_PATHS.register}`,
    scopes_supported: SCOPE_NAMES,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    // Public clients only: PKCE proves who exchanges a code (OAuth 2.1 §2.1).
    token_endpoint_auth_methods_supported: ['none'],
    code_challenge_methods_supported: ['S256'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${publicUrl}/docs`,
  }
}

/** A new secret (a code or a token) with its prefix, and the hash it is stored by. */
export function newSecret(prefix: string): { value: string; hash: string } {
  const value = `${prefix}${randomBytes(32).toString('base64url')}`
  return { value, hash: hashApiKey(value) }
}

/** A new access and refresh token pair, and their hashes with expiry for the store. */
export function newTokens(services: Services): { access: string; refresh: string; hashes: OAuthTokenHashes } {
  const now = services.clock()
  const access = newSecret('mra_')
  const refresh = newSecret('mrr_')
  const { accessTokenTtl, refreshTokenTtl } = services.config.oauth
  return {
    access: access.value,
    refresh: refresh.value,
    hashes: {
      access: { hash: access.hash, expiresAt: now + accessTokenTtl },
      refresh: { hash: refresh.hash, expiresAt: now + refreshTokenTtl },
    },
  }
}

/** An authorization request's answer to its client: the redirect URI with `params` (and `iss`, RFC 9207). */
function redirectBack(c: Context, redirectUri: string, params: Record<string, string | undefined>, issuer: string) {
  const url = new URL(redirectUri)
  for (const [k, v] of Object.entries({ ...params, iss: issuer })) if (v !== undefined) url.searchParams.set(k, v)
  return c.redirect(url.href, 303)
}

/** A request that is checked: the client, where it goes back to, and what it asks. */
interface CheckedRequest {
  client: ClientInfo
  redirectUri: string
  scopes: Scope[]
  resource: string
  codeChallenge: string
}

/**
 * The authorization server: RFC 8414 metadata, Dynamic Client Registration (RFC 7591), the
 * authorization endpoint (a page where a person signs in with an API key of the account and
 * allows or denies) and the token endpoint, as the MCP authorization specification (2025-11-25)
 * asks: authorization code with PKCE S256 only, the resource indicator required.
 * `options.clientMetadataDeadlineMs` shortens a metadata document's deadline, for tests.
 */
export function mountOAuth(
  app: Hono,
  services: Services,
  signIn: SignIn,
  options: { clientMetadataDeadlineMs?: number } = {},
): void {
  const { config, store, clock } = services
  const issuer = config.publicUrl
  const resources = resourcesOf(issuer)
  const resolver = createResolver(config.delivery.dnsServers)
  const metadata = authorizationServerMetadata(issuer)
  app.get('/.well-known/oauth-authorization-server', (c) => c.json(metadata))
  mountRegistration(app, services)
  mountToken(app, services)

  /**
   * Checks an authorization request. A client or redirect URI that cannot be used is a
   * ClientProblem (shown to the person, never redirected to: RFC 6749 §4.1.2.1); any other
   * fault goes back to the client as an error.
   */
  const check = async (
    p: AuthorizeParams,
    signal: AbortSignal,
  ): Promise<CheckedRequest | { error: string; description: string; redirectUri: string }> => {
    if (!p.client_id) throw new ClientProblem('the request names no client (client_id)')
    const client = await resolveClient(p.client_id, {
      store,
      resolver,
      allowPrivate: config.oauth.allowPrivateClientMetadata,
      logger: services.logger,
      signal,
      deadlineMs: options.clientMetadataDeadlineMs,
    })
    const redirectUri = p.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined)
    if (!redirectUri) throw new ClientProblem('the request names no redirect_uri, and the client has several')
    if (!redirectMatches(client.redirectUris, redirectUri))
      throw new ClientProblem(`${redirectUri} is not a redirect URI of this client`)
    const fault = (error: string, description: string) => ({ error, description, redirectUri })
    if (p.response_type !== 'code') return fault('unsupported_response_type', 'response_type must be code')
    if (!p.code_challenge || p.code_challenge_method !== 'S256' || !/^[A-Za-z0-9_-]{43}$/.test(p.code_challenge))
      return fault('invalid_request', 'PKCE is required: a code_challenge with code_challenge_method S256')
    if (!p.resource) return fault('invalid_target', `resource is required (RFC 8707): ${resources.join(' or ')}`)
    if (!resources.includes(p.resource))
      return fault('invalid_target', `${p.resource} is not a resource of this server: ${resources.join(' or ')}`)
    // Scopes this server does not know (openid, offline_access…) are left out (RFC 6749 §3.3); none asked is all.
    const asked = (p.scope ?? '').split(' ').filter(Boolean)
    const scopes = asked.length ? SCOPE_NAMES.filter((s) => asked.includes(s)) : SCOPE_NAMES
    if (!scopes.length) return fault('invalid_scope', `no scope this server knows was asked: ${SCOPE_NAMES.join(' ')}`)
    return { client, redirectUri, scopes, resource: p.resource, codeChallenge: p.code_challenge }
  }
  const paramsOf = (source: Record<string, unknown>): AuthorizeParams =>
    Object.fromEntries(AUTHORIZE_PARAMS.filter((k) => typeof source[k] === 'string').map((k) => [k, source[k]]))
  const show = (c: Context, body: string, status: 200 | 400 | 401 | 429 = 200) => c.html(body, status, PAGE_HEADERS)

  /** Checks the request: `{request}` when it can be answered, else `{answer}`, its problem page or its fault's redirect. */
  const checked = async (c: Context, p: AuthorizeParams) => {
    try {
      // The request's signal: a client that goes away takes the metadata document's fetch with it.
      const r = await check(p, c.req.raw.signal)
      if ('error' in r)
        return {
          answer: redirectBack(
            c,
            r.redirectUri,
            { error: r.error, error_description: r.description, state: p.state },
            issuer,
          ),
        }
      return { request: r }
    } catch (err) {
      if (err instanceof ClientProblem) return { answer: show(c, problemPage(err.message), 400) }
      throw err
    }
  }

  app.get(OAUTH_PATHS.authorize, async (c) => {
    const p = paramsOf(c.req.query())
    const { answer, request } = await checked(c, p)
    return answer ?? show(c, signInPage(request.client, request.scopes, p, request.redirectUri))
  })

  app.post(OAUTH_PATHS.authorize, async (c) => {
    const form = await c.req.parseBody({ all: true })
    const p = paramsOf(form)
    // The form is the person's browser's word only: the whole request is checked again.
    const { answer, request } = await checked(c, p)
    if (answer) return answer
    if (form.decision === 'deny')
      return redirectBack(
        c,
        request.redirectUri,
        { error: 'access_denied', error_description: 'the person denied it', state: p.state },
        issuer,
      )
    const key = typeof form.api_key === 'string' ? form.api_key : ''
    let owner: Awaited<ReturnType<SignIn>>
    try {
      owner = await signIn(c, key)
    } catch (err) {
      if (!(err instanceof MailroomError) || (err.code !== 401 && err.code !== 429)) throw err
      const message = err.code === 401 ? 'That is not a live API key of an account here.' : err.message
      return show(c, signInPage(request.client, request.scopes, p, request.redirectUri, message), err.code)
    }
    const account = await store.accounts.get(owner.accountId)
    if (!account) throw new MailroomError(500, 'internal error')
    if (form.decision !== 'allow')
      return show(c, consentPage(request.client, account, owner.sandbox, request.scopes, p, key))
    const kept = [form.allow_scope ?? []].flat()
    const scopes = request.scopes.filter((s) => kept.includes(s))
    if (!scopes.length)
      return redirectBack(
        c,
        request.redirectUri,
        { error: 'access_denied', error_description: 'no scope was allowed', state: p.state },
        issuer,
      )
    const code = newSecret('mrc_')
    const granted: OAuthCode = {
      accountId: owner.accountId,
      clientId: request.client.id,
      clientName: request.client.name,
      redirectUri: request.redirectUri,
      redirectUriNamed: p.redirect_uri !== undefined,
      codeChallenge: request.codeChallenge,
      scopes,
      resource: request.resource,
      sandbox: owner.sandbox,
      // The key's send policy binds its tokens too: the grant keeps it (docs/approval.md).
      policy: owner.policy ?? null,
      expiresAt: clock() + CODE_TTL_MS,
    }
    await store.oauth.addCode(code.hash, granted)
    return redirectBack(c, request.redirectUri, { code: code.value, state: p.state }, issuer)
  })
}

/** RFC 7636 §4.6: whether a code_verifier is the one whose S256 challenge the code holds. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) return false
  return createHash('sha256').update(verifier).digest('base64url') === challenge
}
