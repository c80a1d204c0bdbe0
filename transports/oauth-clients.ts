import { request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import type { Logger } from 'pino'
import { PACKAGE } from '../package-info.js'
import type { MxResolver } from '../relay/routes.js'
import { nonPublicKind } from '../relay/routes.js'
import { addressesFor, described, hostOf, pinnedLookup } from '../relay/webhook-post.js'
import type { Store } from '../storage/store.js'

/** An OAuth client as the authorization step needs it: registered (RFC 7591) or described by its metadata document. */
export interface ClientInfo {
  id: string
  name: string | null
  redirectUris: string[]
}

/**
 * How long fetching a Client ID Metadata Document may take in all, from the lookup to its last
 * byte: a server that trickles its answer cannot hold an authorization request longer.
 */
export const CLIENT_METADATA_DEADLINE_MS = 10_000
/** A document's largest size. */
const CLIENT_METADATA_MAX_BYTES = 64 * 1024
const SETTING = 'MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA'

/** A client the authorization server cannot use: the page says why, and nobody is redirected (RFC 6749 §4.1.2.1). */
export class ClientProblem extends Error {}

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost'])

/**
 * Whether a redirect URI is one the client registered: exactly, or (RFC 8252 §7.3, OAuth for
 * native apps) a loopback http URI that differs in its port only.
 */
export function redirectMatches(registered: readonly string[], given: string): boolean {
  if (registered.includes(given)) return true
  let url: URL
  try {
    url = new URL(given)
  } catch {
    return false
  }
  if (url.protocol !== 'http:' || !LOOPBACK.has(url.hostname)) return false
  url.port = ''
  return registered.some((r) => {
    try {
      const u = new URL(r)
      u.port = ''
      return u.protocol === 'http:' && u.href === url.href
    } catch {
      return false
    }
  })
}

/**
 * Schemes no redirect may use: they run, show or read something in the browser itself
 * (`view-source:https://…` would display the client's page, code and all, to whoever framed it).
 */
const UNSAFE_SCHEMES = new Set([
  'javascript:',
  'data:',
  'file:',
  'vbscript:',
  'about:',
  'blob:',
  'filesystem:',
  'view-source:',
])

/** Why a redirect URI cannot be registered, or null: https, http on loopback, or an app's own scheme (RFC 8252 §7.1). */
export function redirectUriProblem(text: unknown): string | null {
  if (typeof text !== 'string' || text.length > 2000)
    return 'each redirect URI must be a string of at most 2000 characters'
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return `${text} is not an absolute URI`
  }
  // An empty fragment (`…/cb#`) too: URL drops it from `hash`, but it is there (RFC 6749 §3.1.2).
  if (text.includes('#')) return `${text} has a fragment, which a redirect URI may not have (RFC 6749 §3.1.2)`
  if (UNSAFE_SCHEMES.has(url.protocol)) return `${text}: ${url.protocol} is not a scheme a redirect may use`
  if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname))
    return `${text}: plain http is allowed for loopback redirects only (127.0.0.1, [::1], localhost)`
  return null
}

/** Whether a client id is a URL (a Client ID Metadata Document's) rather than one mailroom gave. */
export const isUrlClientId = (id: string) => /^https?:\/\//i.test(id)

/** How a client is found: the store, and for a URL client id how its document is fetched. */
export interface ResolveOptions {
  store: Store
  resolver: MxResolver
  allowPrivate: boolean
  /** Where why a document could not be fetched is told: the page says only that it could not. */
  logger: Logger
  /** The authorization request's: aborted when its client goes away, and the fetch with it. */
  signal?: AbortSignal
  /** The whole fetch's deadline; CLIENT_METADATA_DEADLINE_MS unless a test says otherwise. */
  deadlineMs?: number
}

/**
 * The client of a `client_id`: a registered one from the store, or a URL whose Client ID
 * Metadata Document is fetched (under the same address rules as webhooks: public addresses only,
 * connected to the address that was checked, unless MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA).
 * Throws a ClientProblem saying why it cannot be used.
 */
export async function resolveClient(id: string, options: ResolveOptions): Promise<ClientInfo> {
  if (!isUrlClientId(id)) {
    const client = await options.store.oauth.client(id)
    if (!client) throw new ClientProblem(`no client ${id} is registered here: register it again`)
    return { id: client.id, name: client.name, redirectUris: client.redirectUris }
  }
  let text: string
  try {
    text = await fetchClientMetadata(clientIdUrl(id, options.allowPrivate), options)
  } catch (err) {
    if (err instanceof ClientProblem) throw err
    // Why stays in the log: the page would tell anyone what a name resolves to, or what answers at an address.
    options.logger.warn({ clientId: id, reason: (err as Error).message }, 'client metadata document not fetched')
    throw new ClientProblem(`the client's metadata document could not be fetched: ${id}`)
  }
  let doc: unknown
  try {
    doc = JSON.parse(text)
  } catch {
    throw new ClientProblem(`${id} did not answer JSON`)
  }
  if (!doc || typeof doc !== 'object') throw new ClientProblem(`${id} did not answer a JSON object`)
  const meta = doc as Record<string, unknown>
  if (meta.client_id !== id) throw new ClientProblem(`the document at ${id} names another client_id`)
  const uris = meta.redirect_uris
  if (!Array.isArray(uris) || uris.length === 0 || uris.some((u) => redirectUriProblem(u)))
    throw new ClientProblem(`the document at ${id} has no usable redirect_uris`)
  const name = typeof meta.client_name === 'string' ? meta.client_name.slice(0, 200) : null
  return { id, name, redirectUris: uris as string[] }
}

/** A client id's URL, or a ClientProblem: https (http too with allowPrivate), with a path, no credentials or fragment. */
function clientIdUrl(id: string, allowPrivate: boolean): URL {
  let url: URL
  try {
    url = new URL(id)
  } catch {
    throw new ClientProblem(`${id} is not a URL`)
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:'))
    throw new ClientProblem(`a client id URL must be https: ${id}`)
  if (url.pathname === '/' || url.username || url.password || url.hash)
    throw new ClientProblem(`a client id URL has a path, and no user name, password or fragment: ${id}`)
  return url
}

/** `promise`, or its signal's abort, whichever comes first (a DNS lookup takes no signal). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason)
    if (signal.aborted) return abort()
    signal.addEventListener('abort', abort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort))
  })
}

/**
 * Fetches a Client ID Metadata Document's text: GET, no redirects, at most 64 KB, all of it
 * (lookup, connection, headers, body) within the deadline, and abandoned with the request.
 * Throws why not, for the log.
 */
async function fetchClientMetadata(url: URL, options: ResolveOptions): Promise<string> {
  const deadlineMs = options.deadlineMs ?? CLIENT_METADATA_DEADLINE_MS
  const deadline = AbortSignal.timeout(deadlineMs)
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline
  const host = hostOf(url)
  if (
    !options.allowPrivate &&
    (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) && nonPublicKind(host)))
  )
    throw new Error(`${isIP(host) ? described(host) : `${host} is a loopback name`}; not fetched (${SETTING})`)
  try {
    const [address] = await abortable(addressesFor(host, options.resolver, options.allowPrivate, SETTING), signal)
    return await get(url, address, signal)
  } catch (err) {
    if (deadline.aborted) throw new Error(`no complete answer within ${deadlineMs / 1000} s`)
    if (options.signal?.aborted) throw new Error('the authorization request was abandoned')
    throw err
  }
}

/** One GET of `url` at `address`, its body as text if it answered 200 with at most 64 KB. */
function get(url: URL, address: string, signal: AbortSignal): Promise<string> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise<string>((resolve, reject) => {
    const req = send(url, {
      method: 'GET',
      lookup: pinnedLookup(address),
      signal,
      headers: { accept: 'application/json', 'user-agent': `${PACKAGE.product}/${PACKAGE.version}` },
    })
    req.on('error', reject)
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        return reject(new Error(`answered HTTP ${res.statusCode}`))
      }
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
        if (body.length > CLIENT_METADATA_MAX_BYTES) req.destroy(new Error('the document is larger than 64 KB'))
      })
      res.on('end', () => resolve(body))
      res.on('error', reject)
    })
    req.end()
  })
}
