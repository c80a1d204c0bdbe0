import { createHmac } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { LookupFunction } from 'node:net'
import { isIP } from 'node:net'
import { PACKAGE } from '../package-info.js'
import { nonPublicKind, type MxResolver } from './routes.js'

/** How long an endpoint has to answer an event, from the first byte sent. */
export const WEBHOOK_TIMEOUT_MS = 10_000
/** Characters of an endpoint's answer kept in a webhook's last error. */
const ERROR_MAX = 300

/**
 * The Standard Webhooks signature of a request: `v1,` and the base64 HMAC-SHA256, keyed with the
 * secret's bytes (base64 after `whsec_`), of `<webhook-id>.<webhook-timestamp>.<body>`.
 */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/** `127.0.0.1, a loopback address` */
export const described = (address: string) => {
  const kind = nonPublicKind(address) ?? 'public'
  return `${address}, ${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind} address`
}

/** The host of a URL as a resolver or isIP takes it (an IPv6 literal without its brackets). */
export const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, '')

/**
 * Why a webhook URL is refused when it is added, or null: not http(s), credentials in it, or a
 * literal non-public address (or `localhost`) without `allowPrivate`. A host name is checked each
 * time an event is sent, against the addresses it then resolves to (postWebhook).
 */
export function webhookUrlProblem(text: string, allowPrivate: boolean): string | null {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return `"${text}" is not an absolute URL`
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `"${text}" is not an http:// or https:// URL`
  if (url.username || url.password)
    return 'a webhook URL carries no user name or password; authenticate by its signature'
  if (allowPrivate) return null
  const host = hostOf(url)
  if (host === 'localhost' || host.endsWith('.localhost'))
    return `${host} is a loopback name; set MAILROOM_ALLOW_PRIVATE_WEBHOOKS=true to post to it`
  if (isIP(host) && nonPublicKind(host))
    return `${host} is ${described(host).split(', ')[1]}; set MAILROOM_ALLOW_PRIVATE_WEBHOOKS=true to post to it`
  return null
}

/** A lookup that answers `address` whatever the name: a connection goes to the address that was checked. */
export function pinnedLookup(address: string): LookupFunction {
  const family = isIP(address)
  return ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) =>
    opts?.all ? cb(null, [{ address, family }]) : cb(null, address, family)) as unknown as LookupFunction
}

const NOT_FOUND = new Set(['ENODATA', 'ENOTFOUND', 'NOTFOUND'])

/**
 * The addresses to connect to, as resolved now, without the non-public ones unless allowed (by
 * `setting`, named in the refusal); throws why there are none.
 */
export async function addressesFor(
  host: string,
  resolver: MxResolver,
  allowPrivate: boolean,
  setting = 'MAILROOM_ALLOW_PRIVATE_WEBHOOKS',
): Promise<string[]> {
  let found: string[]
  if (isIP(host)) found = [host]
  else {
    const results = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
    found = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []))
    const failure = results.find(
      (r) => r.status === 'rejected' && !NOT_FOUND.has((r.reason as NodeJS.ErrnoException).code ?? ''),
    ) as PromiseRejectedResult | undefined
    if (!found.length)
      throw new Error(
        failure
          ? `DNS lookup for ${host} failed (${(failure.reason as NodeJS.ErrnoException).code ?? failure.reason})`
          : `${host} has no address`,
      )
  }
  const usable = allowPrivate ? found : found.filter((a) => !nonPublicKind(a))
  if (!usable.length)
    throw new Error(`${host} resolves only to ${found.map(described).join(' and ')}: not sent (${setting})`)
  return usable
}

/**
 * Posts one event: resolves the host now and connects only to an address that passed the check
 * (no second lookup a DNS server could answer differently), signs with the current time, and
 * waits WEBHOOK_TIMEOUT_MS at most. Resolves with null when the endpoint answered 2xx, else why not.
 */
export async function postWebhook(
  event: { url: string; secret: string; eventId: string; payload: string },
  options: { resolver: MxResolver; allowPrivate: boolean; now: number; signal?: AbortSignal },
): Promise<string | null> {
  const url = new URL(event.url)
  let addresses: string[]
  try {
    addresses = await addressesFor(hostOf(url), options.resolver, options.allowPrivate)
  } catch (err) {
    return (err as Error).message
  }
  const address = addresses[0]
  const lookup = pinnedLookup(address)
  const timestamp = Math.floor(options.now / 1000)
  const body = Buffer.from(event.payload)
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise<string | null>((resolve) => {
    const req = send(url, {
      method: 'POST',
      lookup,
      signal: options.signal,
      headers: {
        'content-type': 'application/json',
        'content-length': body.length,
        'user-agent': `${PACKAGE.product}/${PACKAGE.version}`,
        'webhook-id': event.eventId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(event.secret, event.eventId, timestamp, event.payload),
      },
    })
    const timer = setTimeout(() => {
      const why = `no answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`
      req.destroy(new Error(why))
      done(why)
    }, WEBHOOK_TIMEOUT_MS)
    const done = (error: string | null) => {
      clearTimeout(timer)
      resolve(error)
    }
    req.on('error', (err) => done(err.message))
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        if (text.length < ERROR_MAX) text += chunk
      })
      res.on('error', () => {})
      res.on('end', () => {
        if (status >= 200 && status < 300) return done(null)
        const answer = text.replace(/\s+/g, ' ').trim().slice(0, ERROR_MAX)
        done(`${address} answered HTTP ${status}${answer ? `: ${answer}` : ''}`)
      })
    })
    req.end(body)
  })
}
