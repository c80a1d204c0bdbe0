import type { Context, Hono } from 'hono'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import type { OAuthCode, OAuthGrant } from '../storage/store.js'
import { hashApiKey } from '../storage/secrets.js'
import type { Services } from '../tools/define.js'
import { isUrlClientId } from './oauth-clients.js'
import { newTokens, OAUTH_PATHS, resourcesOf, verifierMatches } from './oauth.js'

/** An OAuth error answer (RFC 6749 §5.2), never cached. */
export function oauthError(
  c: Context,
  status: ContentfulStatusCode,
  error: string,
  description: string,
  headers: Record<string, string> = {},
) {
  return c.json({ error, error_description: description }, status, { 'Cache-Control': 'no-store', ...headers })
}

/** What each refusal of a code the store answers says. */
const CODE_REFUSALS = {
  reused: 'the code was used already: the grant made with it is revoked',
  unknown: 'the code is not valid',
} as const

/** What each refusal of a refresh token says. */
const REFRESH_REFUSALS = {
  reused: 'the refresh token was used already: the grant is revoked, authorize again',
  expired: 'the refresh token expired: authorize again',
  mismatch: 'the refresh token belongs to another client or resource',
  unknown: 'the refresh token is not valid (unknown, or its grant was revoked)',
} as const

/** Why a code's exchange is refused (an error and its description), or undefined: it may have its tokens. */
function codeRefusal(
  code: OAuthCode,
  asked: { clientId: string; redirectUri?: string; verifier: string; resource: string; now: number },
): [string, string] | undefined {
  if (code.expiresAt <= asked.now) return ['invalid_grant', 'the code expired']
  if (code.clientId !== asked.clientId) return ['invalid_grant', 'the code was issued to another client']
  // RFC 6749 §4.1.3: required when the authorization request named one, and then identical.
  if (code.redirectUriNamed && asked.redirectUri === undefined)
    return ['invalid_request', 'redirect_uri is required: the authorization request named one']
  if (asked.redirectUri !== undefined && asked.redirectUri !== code.redirectUri)
    return ['invalid_grant', 'redirect_uri is not the one the code was issued for']
  if (!verifierMatches(asked.verifier, code.codeChallenge))
    return ['invalid_grant', 'the code_verifier does not match the code_challenge (PKCE)']
  if (asked.resource !== code.resource)
    return ['invalid_target', `the code was issued for ${code.resource}, not ${asked.resource}`]
  return undefined
}

/**
 * The token endpoint (RFC 6749 §3.2): an authorization code exchanged with its PKCE verifier, or a
 * refresh token rotated. Public clients only: the client is the client_id it names.
 */
export function mountToken(app: Hono, services: Services): void {
  const { store, clock, config } = services
  const resources = resourcesOf(config.publicUrl)
  const issued = (c: Context, grant: OAuthGrant, tokens: ReturnType<typeof newTokens>) =>
    c.json(
      {
        access_token: tokens.access,
        token_type: 'Bearer',
        expires_in: Math.floor(config.oauth.accessTokenTtl / 1000),
        refresh_token: tokens.refresh,
        scope: grant.scopes.join(' '),
      },
      200,
      { 'Cache-Control': 'no-store', Pragma: 'no-cache' },
    )

  app.post(OAUTH_PATHS.token, async (c) => {
    const type = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase()
    if (type !== 'application/x-www-form-urlencoded')
      return oauthError(c, 400, 'invalid_request', 'send the token request as application/x-www-form-urlencoded')
    const form = await c.req.parseBody()
    const text = (name: string) => (typeof form[name] === 'string' ? (form[name] as string) : undefined)
    const clientId = text('client_id')
    if (c.req.header('authorization') && !clientId)
      return oauthError(c, 401, 'invalid_client', 'clients here are public: send client_id, without a secret')
    if (!clientId) return oauthError(c, 401, 'invalid_client', 'client_id is required')
    if (!isUrlClientId(clientId) && !(await store.oauth.client(clientId)))
      return oauthError(c, 401, 'invalid_client', `no client ${clientId} is registered here: register it again`)
    const resource = text('resource')
    if (!resource)
      return oauthError(c, 400, 'invalid_target', `resource is required (RFC 8707): ${resources.join(' or ')}`)
    if (!resources.includes(resource))
      return oauthError(c, 400, 'invalid_target', `${resource} is not a resource of this server`)
    const grantType = text('grant_type')

    if (grantType === 'refresh_token') {
      const refreshToken = text('refresh_token')
      if (!refreshToken) return oauthError(c, 400, 'invalid_request', 'refresh_token is required')
      const tokens = newTokens(services)
      const answer = await store.oauth.refresh({
        hash: hashApiKey(refreshToken),
        clientId,
        resource,
        tokens: tokens.hashes,
        now: clock(),
      })
      if (answer.state !== 'rotated') return oauthError(c, 400, 'invalid_grant', REFRESH_REFUSALS[answer.state])
      return issued(c, answer.grant, tokens)
    }
    if (grantType !== 'authorization_code')
      return oauthError(c, 400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token')
    const code = text('code')
    const verifier = text('code_verifier')
    if (!code || !verifier) return oauthError(c, 400, 'invalid_request', 'code and code_verifier are required')
    const tokens = newTokens(services)
    // Taken before it is checked: a code is good for one try, right or wrong.
    const asked = { clientId, redirectUri: text('redirect_uri'), verifier, resource, now: clock() }
    const answer = await store.oauth.exchangeCode({
      hash: hashApiKey(code),
      tokens: tokens.hashes,
      now: asked.now,
      refuse: (taken) => codeRefusal(taken, asked),
    })
    if (answer.state === 'granted') return issued(c, answer.grant, tokens)
    if (answer.state === 'refused') return oauthError(c, 400, ...answer.refusal)
    return oauthError(c, 400, 'invalid_grant', CODE_REFUSALS[answer.state])
  })
}
