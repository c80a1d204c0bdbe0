import { createHash, timingSafeEqual } from 'node:crypto'
import type { Context, Hono } from 'hono'
import { matchedRoutes } from 'hono/route'
import { isIP } from 'node:net'
import type { Config } from '../config.js'
import { MailroomError } from '../errors.js'
import type { Metrics } from '../metrics.js'

/**
 * `GET /metrics`, the Prometheus text format, for operators; not part of the REST API (neither in
 * the OpenAPI document nor a tool). With MAILROOM_METRICS_TOKEN it asks every client for
 * `Authorization: Bearer <token>`; without, it is served only to clients on this machine
 * (loopback), a request through a proxy not being one of them (see loopbackOnly).
 */
export function mountMetrics(
  app: Hono,
  metrics: Pick<Metrics, 'render'>,
  config: Pick<Config, 'metricsToken' | 'trustProxy'>,
): void {
  const allowed = config.metricsToken === null ? loopbackOnly(config.trustProxy) : bearer(config.metricsToken)
  app.get('/metrics', async (c) => {
    allowed(c)
    const { contentType, body } = await metrics.render()
    return c.body(body, 200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' })
  })
  app.all('/metrics', (c) => {
    throw new MailroomError(405, `${c.req.method} is not allowed on /metrics; use GET`, { headers: { Allow: 'GET' } })
  })
}

/** Refuses a request without the token, comparing in a time that does not tell how much of it was right. */
function bearer(token: string): (c: Context) => void {
  const digest = (s: string) => createHash('sha256').update(s).digest()
  const expected = digest(token)
  return (c) => {
    const given = /^Bearer +(\S+) *$/i.exec(c.req.header('authorization') ?? '')?.[1]
    if (given !== undefined && timingSafeEqual(digest(given), expected)) return
    throw new MailroomError(
      401,
      'the metrics token is missing or wrong: send Authorization: Bearer <the value of MAILROOM_METRICS_TOKEN>',
      { headers: { 'WWW-Authenticate': 'Bearer realm="mailroom metrics"' } },
    )
  }
}

/**
 * Refuses a client that is not on this machine: its address (the socket's, or a trusted proxy's
 * X-Forwarded-For, see clientAddress) is not loopback. A proxy on this machine connects from
 * loopback for clients anywhere, so a request carrying a proxy's header is refused too: any
 * X-Forwarded-For unless MAILROOM_TRUST_PROXY names the proxies (then clientAddress reads it),
 * and Forwarded or X-Real-IP always (they are never read).
 */
function loopbackOnly(trustProxy: readonly string[]): (c: Context) => void {
  const readsForwardedFor = trustProxy.length > 0
  return (c) => {
    const proxied =
      c.req.header('forwarded') !== undefined ||
      c.req.header('x-real-ip') !== undefined ||
      (!readsForwardedFor && c.req.header('x-forwarded-for') !== undefined)
    if (isLoopback(c.get('clientIp')) && !proxied) return
    throw new MailroomError(
      403,
      '/metrics is served only to clients on this machine (loopback, not through a proxy) unless MAILROOM_METRICS_TOKEN is set',
    )
  }
}

function isLoopback(ip: string): boolean {
  return isIP(ip) === 4 ? ip.startsWith('127.') : ip === '::1'
}

/**
 * The route a request matched, as the OpenAPI document writes it (`/mail/{id}`): the first route
 * that is not a middleware's, as routing would have served it, even when a middleware answered
 * first (a body too large). `unmatched` when none did. Never the path a client sent, which could
 * name an account's order or grow the metric without end.
 */
export function routeOf(c: Context): string {
  const route = matchedRoutes(c).find((r) => r.path !== '*' && r.path !== '/*')
  return route ? route.path.replace(/:(\w+)(\{[^}]*\})?/g, '{$1}') : 'unmatched'
}
