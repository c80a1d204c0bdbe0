import { Hono } from 'hono'
import { randomUUID } from 'node:crypto'
import { bodyLimit } from 'hono/body-limit'
import { cors } from 'hono/cors'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { STATUS_CODES, maxHeaderSize, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { MailroomError, asMailroomError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { Store } from '../storage/store.js'
import type { Services } from '../tools/define.js'
import { mountConsole } from './console.js'
import { mountDocuments } from './documents.js'
import { mountMcp } from './mcp-http.js'
import { createAuth } from './auth.js'
import { clientAddress } from './client-address.js'
import { mountOAuth } from './oauth.js'
import { mountRest } from './rest.js'
import { mountUnsubscribe } from './unsubscribe.js'
import {
  declaredLength,
  hasUnreadBody,
  OverBudget,
  releaseHeldBytes,
  SMALL_BODY_LIMIT,
  tooLarge,
} from './request-body.js'
import { TOOLS } from '../tools/index.js'
import { mountMetrics, routeOf } from './metrics.js'

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's X-Request-Id, also in its log lines. */
    requestId: string
    /** The client's IP address (see clientAddress). */
    clientIp: string
  }
}

/**
 * Settings of the Node.js server the app runs in. An idle keep-alive connection is kept longer
 * than the proxies and clients in front of it keep theirs (nginx and most load balancers: 60 s),
 * so that they close it, not the server: one closed by the server (Node's default: after 5 s) just
 * as a client sends on it again fails that request ("other side closed"). Node's guidance: the
 * headers timeout longer than the keep-alive one.
 */
export const HTTP_SERVER_OPTIONS = { keepAliveTimeout: 75_000, headersTimeout: 76_000 }

/**
 * How `serve` runs the app. A body left unread by its answer (a full budget's 503) is left to Node,
 * which reads it to its end and drops it, within the server's request timeout; @hono/node-server's
 * own clean-up would instead close the connection after 500 ms, under a client still sending.
 */
export const HTTP_SERVE_OPTIONS = { serverOptions: HTTP_SERVER_OPTIONS, autoCleanupIncoming: false }

/**
 * Node's answer to a request it cannot parse (headers over its 16 KB limit, a bad Content-Length,
 * a malformed request line), in the JSON error shape of every other answer: Node's own has an
 * empty body. Like Node, a socket that can no longer be written, or whose response has begun, is
 * only destroyed.
 */
export function answerClientError(err: Error & { code?: string; reason?: string }, socket: Duplex): void {
  const response = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage
  if (err.code === 'ECONNRESET' || !socket.writable || response?.headersSent) return void socket.destroy()
  const [code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, `the request's headers are larger than ${maxHeaderSize} bytes`]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'the request took too long to arrive']
        : [400, `the request is not valid HTTP${err.reason ? `: ${err.reason}` : ''}`]
  const body = JSON.stringify({ code, message })
  const head = [
    `HTTP/1.1 ${code} ${STATUS_CODES[code]}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${randomUUID()}`,
    'Access-Control-Allow-Origin: *',
    'Connection: close',
  ]
  // Closed once the answer is out: the rest of what the client sends cannot be read as requests.
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy())
}

/** The paths whose POST carries a message (see HttpBinding.message): MCP's too, as its tool calls may. */
const MESSAGE_PATHS = new Set(['/mcp', ...TOOLS.filter((t) => t.http.message).map((t) => t.http.path)])

/** Why delivery is not running, or null while it is (see /readyz). */
export type DeliveryState = () => string | null

/** Paths a load balancer, an orchestrator or a monitoring system asks every few seconds: their access lines are debug while they answer 200. */
const PROBES = new Set(['/healthz', '/readyz', '/metrics'])

/**
 * `/healthz`: the process answers. `/readyz`: it can take work, the database can be written and
 * delivery runs; else a 503 saying why, so that a load balancer sends requests elsewhere. Neither
 * needs an API key. An app given no delivery state (tests) checks the database only.
 */
export function mountHealth(app: Hono, store: Store, delivery: DeliveryState = () => null): void {
  const noStore = { 'Cache-Control': 'no-store' }
  app.get('/healthz', (c) => c.json({ status: 'ok' }, 200, noStore))
  app.get('/readyz', async (c) => {
    const reason =
      delivery() ??
      (await store.writable().then(
        () => null,
        (err: Error) => `the database cannot be written: ${err.message}`,
      ))
    if (reason) throw new MailroomError(503, reason, { headers: noStore })
    return c.json({ status: 'ok' }, 200, noStore)
  })
}

/**
 * The whole HTTP surface in one Hono app: REST, MCP at /mcp, the documents, the console at /console
 * and the health checks; with `metrics`, GET /metrics, and every request counted.
 */
export function createHttpApp(
  services: Services,
  options: { delivery?: DeliveryState; metrics?: Metrics } = {},
): Hono & { close(): Promise<void> } {
  const app = new Hono()
  const { logger } = services

  // Every answer carries X-Request-Id (the client's, when it sent a usable one) and the CORS
  // headers. They are set once the handler has answered: set before, they would make Hono wrap a
  // response the handler built itself (MCP's) into a new one whose body is a stream.
  const preflight = cors({
    origin: '*',
    allowMethods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    allowHeaders: [
      'Content-Type',
      'Accept',
      'X-API-KEY',
      'Authorization',
      'Idempotency-Key',
      'Mcp-Session-Id',
      'Mcp-Protocol-Version',
      'Last-Event-ID',
    ],
    maxAge: 86400,
  })
  const addressOf = clientAddress(services.config.trustProxy)
  app.use(async (c, next) => {
    const started = performance.now()
    const given = c.req.header('x-request-id')
    const id = given && given.length <= 255 && /^[\w\-=]+$/.test(given) ? given : randomUUID()
    c.set('requestId', id)
    c.set('clientIp', addressOf(c))
    // Browsers may call the API and MCP from other origins: the API key, never a cookie, authorizes.
    if (c.req.method !== 'OPTIONS') await next()
    else c.res = (await preflight(c, next)) ?? c.res
    c.res.headers.set('X-Request-Id', id)
    c.res.headers.set('Access-Control-Allow-Origin', '*')
    c.res.headers.set(
      'Access-Control-Expose-Headers',
      'Mcp-Session-Id,Mcp-Protocol-Version,X-Request-Id,WWW-Authenticate',
    )
    options.metrics?.httpRequest(c.req.method, routeOf(c), c.res.status)
    // The access log: one line per request, the path without its query, never a header's or the
    // body's content (the key, a message).
    logger[PROBES.has(c.req.path) && c.res.status === 200 ? 'debug' : 'info'](
      {
        req: id,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
        ip: c.get('clientIp'),
      },
      'request',
    )
  })
  // Every other body is small (SMALL_BODY_LIMIT): a declared Content-Length is checked from the
  // header alone, before anything is read, and a body of unknown length is counted as it arrives.
  // A message's body is checked against MAILROOM_HTTP_BODY_LIMIT here, then left to its route,
  // which checks the caller's key and reserves the body in the byte budget before reading it. No GET or HEAD body is ever read: those pass untouched
  // (even asking bodyLimit would build a whole web Request for each).
  const messageLimit = services.config.http.bodyLimit
  const countedLimit = bodyLimit({
    maxSize: SMALL_BODY_LIMIT,
    onError: () => {
      throw tooLarge(SMALL_BODY_LIMIT)
    },
  })
  app.use(async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next()
    if (c.req.method === 'POST' && MESSAGE_PATHS.has(c.req.path)) {
      if ((declaredLength(c) ?? 0) > messageLimit) throw tooLarge(messageLimit)
      try {
        return await next()
      } finally {
        releaseHeldBytes(c)
      }
    }
    const length = declaredLength(c)
    if (length === undefined) return countedLimit(c, next)
    if (length > SMALL_BODY_LIMIT) throw tooLarge(SMALL_BODY_LIMIT)
    await next()
  })

  // One count of wrong keys for REST and MCP: a guesser cannot double its tries by using both.
  const { authenticate, signIn } = createAuth(services)
  mountRest(app, services, authenticate)
  mountOAuth(app, services, signIn)
  mountDocuments(app, services.config)
  mountUnsubscribe(app, services)
  mountConsole(app, services.config)
  mountHealth(app, services.store, options.delivery)
  if (options.metrics) mountMetrics(app, options.metrics, services.config)
  const mcp = mountMcp(app, services, authenticate)

  app.notFound((c) => c.json({ code: 404, message: `no such endpoint: ${c.req.method} ${c.req.path}` }, 404))
  app.onError((err, c) => {
    // Hono's own refusals (a malformed multipart body, say) keep their 4xx status.
    const e =
      err instanceof HTTPException && err.status < 500
        ? new MailroomError(err.status, err.message || 'invalid request')
        : asMailroomError(err)
    if (e.code === 500) logger.error({ req: c.get('requestId'), err }, 'internal error')
    // Refused before its body was read (a wrong key, a body too large): the connection is closed
    // once answered, so that the client's upload stops instead of the rest of the body being read
    // to find the next request. A full budget refuses a client with a key, whose body, of a known
    // length within the limit, is rather read to its end and dropped (Node does, see
    // HTTP_SERVE_OPTIONS), so that it can read the answer.
    const drained = err instanceof OverBudget && declaredLength(c) !== undefined
    if (hasUnreadBody(c) && !drained) c.header('Connection', 'close')
    for (const [k, v] of Object.entries(e.headers ?? {})) c.header(k, v)
    return c.json(e.toJSON(), e.code as ContentfulStatusCode)
  })
  return Object.assign(app, { close: () => mcp.close() })
}
