import type { Context } from 'hono'
import { MailroomError, unauthorized } from '../errors.js'
import { AUTH_FAILURE_WINDOW_MS, authFailureCount } from '../relay/auth-throttle.js'
import { hashApiKey, isApiKey } from '../storage/secrets.js'
import type { KeyOwner, PolicyHolder } from '../storage/store.js'
import type { Services } from '../tools/define.js'

/** Who a request speaks for: an API key's account, or an OAuth access token's. */
export interface Identity extends KeyOwner {
  /** The scopes of an access token; undefined for an API key, which may do everything. */
  scopes?: string[]
  /** What the send policy belongs to: the API key, or the token's OAuth grant. */
  holder?: PolicyHolder
}

/** An API key's owner as a request's identity: the key holds its send policy (docs/approval.md). */
export const keyIdentity = (owner: KeyOwner): Identity =>
  owner.keyId === undefined ? owner : { ...owner, holder: { kind: 'key', id: owner.keyId } }

/** What a door (REST, MCP) accepts besides X-API-KEY: tokens bound to one of its resources (RFC 8707). */
export interface Door {
  /** The resource indicators its tokens may be bound to. */
  resources: readonly string[]
  /** Its protected resource metadata (RFC 9728), named in every 401's WWW-Authenticate. */
  metadataUrl: string
}

/** The identity of a request (X-API-KEY, else a bearer API key or OAuth token), or a 401 (or a 429, see createAuth). */
export type Authenticate = (c: Context, door: Door) => Promise<Identity>
/** The owner of an API key a person typed (the OAuth authorization page), or a 401 (or a 429), counted as a request's key. */
export type SignIn = (c: Context, key: string) => Promise<KeyOwner>

/** The bearer token of an `Authorization: Bearer …` header (RFC 6750 §2.1), if there is one. */
export function bearerToken(c: Context): string | undefined {
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(c.req.header('authorization') ?? '')
  return match?.[1]
}

/**
 * The API key of a request: its X-API-KEY, else an `mr_…` key sent as a bearer token, as most
 * mail APIs take theirs (`Authorization: Bearer …`). Any other bearer token is an OAuth token.
 */
export function apiKeyOf(c: Context): string | undefined {
  const key = c.req.header('x-api-key')
  if (key) return key
  const bearer = bearerToken(c)
  return bearer && isApiKey(bearer) ? bearer : undefined
}

/** The OAuth access token of a request: a bearer token that is not an API key, and no X-API-KEY beside it. */
export const oauthTokenOf = (c: Context): string | undefined => (apiKeyOf(c) ? undefined : bearerToken(c))

/** RFC 6750 §3: the challenge of a 401, naming where to discover how to authorize (RFC 9728 §5.1). */
const challenge = (door: Door, error?: string) =>
  `Bearer resource_metadata="${door.metadataUrl}"${error ? `, error="${error}"` : ''}`

/**
 * Checks the API key (X-API-KEY, or a bearer `mr_…`), or else an OAuth access token, for REST and
 * MCP alike: a key is one key whichever header carries it. Wrong keys and unknown
 * tokens are counted per client address (the socket's, or a trusted proxy's X-Forwarded-For, see
 * clientAddress; an IPv6 /64 as one) in the store, so that every node shares one count; past
 * MAILROOM_HTTP_MAX_AUTH_FAILURES in the window, every request from there that needs a key is a
 * 429 until the window passes, a right key too, as for SMTP AUTH: else the answers would still
 * tell a right guess from the wrong ones. A right key writes nothing: the check is answered from
 * the settings cache. Each wrong key is logged (never the key), the last one saying that the
 * throttle starts; the 429s are not, so that a flood of guesses cannot flood the log. A token that
 * expired, or whose grant was revoked, or that is bound to another resource, is refused without
 * being counted.
 */
export function createAuth(services: Services): { authenticate: Authenticate; signIn: SignIn } {
  const { config, clock, logger, store } = services
  const max = config.http.maxAuthFailures
  const failures = authFailureCount(store, 'http', max, clock)
  const fail = async (c: Context, ip: string, what: string) => {
    const failed = await failures.fail(ip)
    const line = { req: c.get('requestId'), ip, path: c.req.path }
    if (failed.throttledUntil === null) return logger.warn(line, `wrong ${what}`)
    const refusedFor = Math.ceil((failed.throttledUntil - clock()) / 1000)
    // Past the limit (guesses sent to several nodes at once), the guess is refused like the next one.
    if (failed.count > max) throwThrottled(failed.throttledUntil)
    const within = `${max} from this address within ${AUTH_FAILURE_WINDOW_MS / 60_000} minutes`
    logger.warn(
      { ...line, retryAfter: refusedFor },
      `wrong ${what}: ${within}, so its requests are refused (429) for ${refusedFor} s`,
    )
  }
  const throwThrottled = (until: number) => {
    const wait = Math.ceil((until - clock()) / 1000)
    throw new MailroomError(429, `too many wrong API keys from this address: try again in ${wait} s`, {
      headers: { 'Retry-After': String(wait) },
    })
  }
  const throttled = async (ip: string) => {
    const until = await failures.throttledUntil(ip)
    if (until !== undefined) throwThrottled(until)
  }
  const signIn: SignIn = async (c, key) => {
    const ip = c.get('clientIp')
    await throttled(ip)
    const owner = key.trim() ? await store.apiKeys.owner(key.trim()) : undefined
    if (owner !== undefined) return owner
    await fail(c, ip, 'API key')
    throw unauthorized()
  }
  const authenticate: Authenticate = async (c, door) => {
    const ip = c.get('clientIp')
    await throttled(ip)
    const key = apiKeyOf(c)
    const token = oauthTokenOf(c)
    if (token) return tokenIdentity(c, token, door)
    const owner = key ? await store.apiKeys.owner(key.trim()) : undefined
    if (owner !== undefined) return keyIdentity(owner)
    if (key) await fail(c, ip, 'API key')
    throw refusal(door, unauthorized().message)
  }
  return { authenticate, signIn }

  async function tokenIdentity(c: Context, token: string, door: Door): Promise<Identity> {
    const found = await store.oauth.accessToken(hashApiKey(token))
    if (!found) {
      await fail(c, c.get('clientIp'), 'access token')
      throw refusal(door, 'the access token is not valid (unknown, or its grant was revoked)', 'invalid_token')
    }
    if (found.expiresAt <= clock()) throw refusal(door, 'the access token expired: refresh it', 'invalid_token')
    if (!door.resources.includes(found.grant.resource))
      throw refusal(
        door,
        `the access token is for ${found.grant.resource}, not this endpoint (${door.resources[0]})`,
        'invalid_token',
      )
    const { accountId, sandbox, scopes, policy } = found.grant
    // The grant holds the send policy: the authorizing key's, carried over like `sandbox`.
    return { accountId, sandbox, scopes, holder: { kind: 'grant', id: found.grant.id }, policy: policy ?? null }
  }
}

/** A 401 with the door's challenge. */
const refusal = (door: Door, message: string, error?: string) =>
  new MailroomError(401, message, { headers: { 'WWW-Authenticate': challenge(door, error) } })
