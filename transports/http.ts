import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { cors } from 'hono/cors'
import { HTTPException } from 'hono/http-exception'
import { requestId } from 'hono/request-id'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { MailroomError, asMailroomError } from '../errors.js'
import type { Services } from '../tools/define.js'
import { mountDocuments } from './documents.js'
import { mountMcp } from './mcp-http.js'
import { mountRest } from './rest.js'

/** The whole HTTP surface in one Hono app: REST, MCP at /mcp, and the documents. */
export function createHttpApp(services: Services): Hono & { close(): Promise<void> } {
  const app = new Hono()
  const { logger } = services

  app.use(requestId())
  app.use(async (c, next) => {
    const started = performance.now()
    await next()
    // Access lines are debug: each send already logs its own `message queued` line at info.
    logger.debug(
      { req: c.get('requestId'), method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started) },
      'request',
    )
  })
  // A declared Content-Length is checked from the header alone, so that the body is then read
  // straight from the socket (hono's bodyLimit would wrap every body in a web stream first);
  // bodies of unknown length are counted as they arrive.
  const limit = services.config.http.bodyLimit
  const tooLarge = () => {
    throw new MailroomError(413, `the request body is larger than ${limit} bytes`)
  }
  const countedLimit = bodyLimit({ maxSize: limit, onError: tooLarge })
  app.use(async (c, next) => {
    const length = c.req.header('content-length')
    if (length === undefined || c.req.header('transfer-encoding') !== undefined) return countedLimit(c, next)
    if (Number(length) > limit) tooLarge()
    await next()
  })

  // Browsers may call the API and MCP from other origins: the API key, never a cookie, authorizes.
  app.use(
    cors({
      origin: '*',
      allowMethods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
      allowHeaders: ['Content-Type', 'Accept', 'X-API-KEY', 'Mcp-Session-Id', 'Mcp-Protocol-Version', 'Last-Event-ID'],
      exposeHeaders: ['Mcp-Session-Id', 'Mcp-Protocol-Version'],
      maxAge: 86400,
    }),
  )

  mountRest(app, services)
  mountDocuments(app, services.config)
  const mcp = mountMcp(app, services)

  app.notFound((c) => c.json({ code: 404, message: `no such endpoint: ${c.req.method} ${c.req.path}` }, 404))
  app.onError((err, c) => {
    // Hono's own refusals (a malformed multipart body, say) keep their 4xx status.
    const e = err instanceof HTTPException && err.status < 500 ? new MailroomError(err.status, err.message || 'invalid request') : asMailroomError(err)
    if (e.code === 500) logger.error({ req: c.get('requestId'), err }, 'internal error')
    for (const [k, v] of Object.entries(e.headers ?? {})) c.header(k, v)
    return c.json(e.toJSON(), e.code as ContentfulStatusCode)
  })
  return Object.assign(app, { close: () => mcp.close() })
}
