import { randomBytes } from 'node:crypto'
import type { Hono } from 'hono'
import type { Services } from '../tools/define.js'
import { redirectUriProblem } from './oauth-clients.js'
import { OAUTH_PATHS } from './oauth.js'
import { oauthError } from './oauth-token.js'

/** The window MAILROOM_OAUTH_REGISTRATIONS_PER_ADDRESS counts registrations over. */
export const REGISTRATION_WINDOW_MS = 3_600_000
/** Most redirect URIs one client registers. */
const MAX_REDIRECT_URIS = 10

/**
 * Dynamic Client Registration (RFC 7591), for public clients: what the client may use is kept
 * (its name and redirect URIs), the rest of its metadata is answered as this server sets it.
 * Limited per client address and in total, so that registrations cannot fill the database.
 */
export function mountRegistration(app: Hono, services: Services): void {
  const { store, clock, config } = services
  app.post(OAUTH_PATHS.register, async (c) => {
    let meta: unknown
    try {
      meta = await c.req.json()
    } catch {
      return oauthError(c, 400, 'invalid_client_metadata', 'the request body is not JSON')
    }
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta))
      return oauthError(c, 400, 'invalid_client_metadata', 'the request body must be a JSON object')
    const m = meta as Record<string, unknown>
    const uris = m.redirect_uris
    if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS)
      return oauthError(c, 400, 'invalid_redirect_uri', `redirect_uris: 1 to ${MAX_REDIRECT_URIS} URIs are required`)
    const problem = uris.map(redirectUriProblem).find((p) => p !== null)
    if (problem) return oauthError(c, 400, 'invalid_redirect_uri', problem)
    const unsupported = (field: string, allowed: string[]) => {
      const value = m[field]
      return value !== undefined && (!Array.isArray(value) || value.some((v) => !allowed.includes(v)))
    }
    if (unsupported('grant_types', ['authorization_code', 'refresh_token']))
      return oauthError(c, 400, 'invalid_client_metadata', 'grant_types: authorization_code and refresh_token only')
    if (unsupported('response_types', ['code']))
      return oauthError(c, 400, 'invalid_client_metadata', 'response_types: code only')
    if (m.client_name !== undefined && (typeof m.client_name !== 'string' || m.client_name.length > 200))
      return oauthError(c, 400, 'invalid_client_metadata', 'client_name: a string of at most 200 characters')
    const now = clock()
    const client = {
      id: `mrcl_${randomBytes(12).toString('base64url')}`,
      name: (m.client_name as string | undefined) ?? null,
      redirectUris: uris as string[],
      registeredFrom: c.get('clientIp'),
      createdAt: now,
    }
    const limits = {
      since: now - REGISTRATION_WINDOW_MS,
      perAddress: config.oauth.registrationsPerAddress,
      total: config.oauth.maxClients,
    }
    const result = await store.oauth.register(client, limits)
    if (result === 'address')
      return oauthError(
        c,
        429,
        'temporarily_unavailable',
        `this address registered ${limits.perAddress} clients within an hour: reuse one, or try again later`,
        { 'Retry-After': String(REGISTRATION_WINDOW_MS / 1000) },
      )
    if (result === 'total')
      return oauthError(c, 503, 'temporarily_unavailable', 'this server takes no more client registrations now')
    return c.json(
      {
        client_id: client.id,
        client_id_issued_at: Math.floor(now / 1000),
        client_name: client.name ?? undefined,
        redirect_uris: client.redirectUris,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
      201,
      { 'Cache-Control': 'no-store' },
    )
  })
}
