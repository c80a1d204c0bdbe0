import { request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
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

/** How long a Client ID Metadata Document has to arrive, and its largest size. */
export const CLIENT_METADATA_TIMEOUT_MS = 5000
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

/** Schemes no redirect may use: they run or read something in the browser itself. */
const UNSAFE_SCHEMES = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'about:', 'blob:'])

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
  if (url.hash) return `${text} has a fragment, which a redirect URI may not have (RFC 6749 §3.1.2)`
  if (UNSAFE_SCHEMES.has(url.protocol)) return `${text}: ${url.protocol} is not a scheme a redirect may use`
  if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname))
    return `${text}: plain http is allowed for loopback redirects only (127.0.0.1, [::1], localhost)`
  return null
}

/** Whether a client id is a URL (a Client ID Metadata Document's) rather than one mailroom gave. */
export const isUrlClientId = (id: string) => /^https?:\/\//i.test(id)

/**
 * The client of a `client_id`: a registered one from the store, or a URL whose Client ID
 * Metadata Document is fetched (under the same address rules as webhooks: public addresses only,
 * connected to the address that was checked, unless MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA).
 * Throws a ClientProblem saying why it cannot be used.
 */
export async function resolveClient(
  id: string,
  options: { store: Store; resolver: MxResolver; allowPrivate: boolean },
): Promise<ClientInfo> {
  if (!isUrlClientId(id)) {
    const client = await options.store.oauth.client(id)
    if (!client) throw new ClientProblem(`no client ${id} is registered here: register it again`)
    return { id: client.id, name: client.name, redirectUris: client.redirectUris }
  }
  const doc = await fetchClientMetadata(id, options)
  if (!doc || typeof doc !== 'object') throw new ClientProblem(`${id} did not answer a JSON object`)
  const meta = doc as Record<string, unknown>
  if (meta.client_id !== id) throw new ClientProblem(`the document at ${id} names another client_id`)
  const uris = meta.redirect_uris
  if (!Array.isArray(uris) || uris.length === 0 || uris.some((u) => redirectUriProblem(u)))
    throw new ClientProblem(`the document at ${id} has no usable redirect_uris`)
  const name = typeof meta.client_name === 'string' ? meta.client_name.slice(0, 200) : null
  return { id, name, redirectUris: uris as string[] }
}

/** Fetches a Client ID Metadata Document: GET, no redirects, at most 64 KB within 5 s. */
async function fetchClientMetadata(
  id: string,
  options: { resolver: MxResolver; allowPrivate: boolean },
): Promise<unknown> {
  let url: URL
  try {
    url = new URL(id)
  } catch {
    throw new ClientProblem(`${id} is not a URL`)
  }
  if (url.protocol !== 'https:' && !(options.allowPrivate && url.protocol === 'http:'))
    throw new ClientProblem(`a client id URL must be https: ${id}`)
  if (url.pathname === '/' || url.username || url.password || url.hash)
    throw new ClientProblem(`a client id URL has a path, and no user name, password or fragment: ${id}`)
  const host = hostOf(url)
  if (
    !options.allowPrivate &&
    (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) && nonPublicKind(host)))
  )
    throw new ClientProblem(
      `${id}: ${isIP(host) ? described(host) : `${host} is a loopback name`}; not fetched (${SETTING})`,
    )
  let address: string
  try {
    ;[address] = await addressesFor(host, options.resolver, options.allowPrivate, SETTING)
  } catch (err) {
    throw new ClientProblem(`${id}: ${(err as Error).message}`)
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  const text = await new Promise<string>((resolve, reject) => {
    const req = send(url, {
      method: 'GET',
      lookup: pinnedLookup(address),
      timeout: CLIENT_METADATA_TIMEOUT_MS,
      headers: { accept: 'application/json', 'user-agent': `${PACKAGE.name}/${PACKAGE.version}` },
    })
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CLIENT_METADATA_TIMEOUT_MS / 1000} s`)))
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
  }).catch((err: Error) => {
    throw new ClientProblem(`${id}: ${err.message}`)
  })
  try {
    return JSON.parse(text)
  } catch {
    throw new ClientProblem(`${id} did not answer JSON`)
  }
}
