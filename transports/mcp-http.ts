import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js'
import type { Context, Hono } from 'hono'
import { randomUUID } from 'node:crypto'
import { MailroomError, unauthorized } from '../errors.js'
import type { Services } from '../tools/define.js'
import { isObject } from './json-schema.js'
import { jsonText, parseJson, readBody, reserveBody } from './request-body.js'
import { createMcpServer, toolCaller, type CallerOf } from './mcp.js'
import { bearerToken, type Authenticate, type Door, type Identity } from './auth.js'
import { mayCall, outOfScope, scopeChallenge, scopeOf } from './scopes.js'
import { TOOLS } from '../tools/index.js'
import type { AnyTool } from '../tools/define.js'

/** A session nobody used for this long is closed. */
export const MCP_SESSION_IDLE_MS = 30 * 60_000
/** Most sessions one account keeps open; opening one more closes its least recently used. */
export const MCP_SESSIONS_PER_ACCOUNT = 100
const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '::1', '[::1]']
/** At most this many servers are kept for session-less requests (about their concurrency). */
const MAX_IDLE_SERVERS = 64

interface Session {
  transport: WebStandardStreamableHTTPServerTransport
  server: Server
  accountId: number
  lastSeen: number
}

const callerOf: CallerOf = (extra) => ({
  accountId: (extra.authInfo?.extra?.accountId as number | undefined) ?? null,
  origin: (extra.authInfo?.extra?.origin as string | undefined) ?? '',
  sandbox: extra.authInfo?.extra?.sandbox === true,
  scopes: extra.authInfo?.extra?.scopes as string[] | undefined,
})

const rpcError = (c: Context, status: 400 | 404 | 405, message: string) =>
  c.json({ jsonrpc: '2.0', error: { code: status === 404 ? -32001 : -32000, message }, id: null }, status)

/**
 * MCP over Streamable HTTP at /mcp. The API key is checked on every request before any JSON-RPC
 * is read. Clients that initialize get a session (Mcp-Session-Id; GET for the server's stream;
 * DELETE to end it), bound to the account that opened it; clients that only POST are served
 * without one.
 */
export function mountMcp(app: Hono, services: Services, authenticate: Authenticate): { close(): Promise<void> } {
  const sessions = new Map<string, Session>()
  /** Servers of finished session-less requests, ready for the next ones. */
  const idle: Server[] = []
  const { config, clock } = services
  const loopback = LOOPBACK_HOSTS.includes(config.http.host)
  const allowedHosts = new Set([...LOOPBACK_HOSTS, new URL(config.publicUrl).hostname])
  const call = toolCaller(services)
  const door: Door = {
    resources: [`${config.publicUrl}/mcp`, config.publicUrl],
    metadataUrl: `${config.publicUrl}/.well-known/oauth-protected-resource/mcp`,
  }

  const sweep = setInterval(() => {
    for (const [id, s] of sessions)
      if (clock() - s.lastSeen > MCP_SESSION_IDLE_MS) void s.server.close(), sessions.delete(id)
  }, 60_000)
  sweep.unref()

  app.all('/mcp', async (c) => {
    // DNS rebinding protection: a page on another site must not reach a loopback-bound server.
    if (loopback) {
      const origin = c.req.header('origin')
      if (
        !allowedHosts.has(new URL(c.req.url).hostname) ||
        (origin && origin !== 'null' && !allowedHosts.has(safeHostname(origin)))
      ) {
        throw new MailroomError(403, 'this Host or Origin is not allowed to reach the MCP endpoint')
      }
    }
    let identity: Identity
    try {
      identity = await authenticate(c, door)
    } catch (err) {
      // An MCP client knows the endpoint, not the header its key goes in, nor (without the
      // WWW-Authenticate challenge) where to authorize.
      if (err instanceof MailroomError && err.code === 401 && !bearerToken(c))
        throw new MailroomError(401, unauthorized(NO_CREDENTIALS).message, { headers: err.headers })
      throw err
    }
    const { accountId, sandbox, scopes } = identity
    // Each request's own key or token decides, in a session too: a session is bound to an account, not a key.
    const caller = { accountId, origin: c.get('clientIp'), sandbox, scopes }
    const credential = c.req.header('x-api-key') ?? bearerToken(c)!
    const authInfo = { token: credential, clientId: `account-${accountId}`, scopes: scopes ?? [], extra: caller }

    // A POST's body is read here, once the key is known, under the server's own body limit
    // (MAILROOM_HTTP_BODY_LIMIT) and reserved in the byte budget before a byte of it is read; it
    // is handed to the transport parsed: left to itself, the transport would refuse a body over 4
    // MB, a message much smaller than MAILROOM_MAX_MESSAGE_SIZE.
    let body: unknown
    if (c.req.method === 'POST') {
      const limit = config.http.bodyLimit
      const reserved = reserveBody(c, services.budget, accountId, limit)
      try {
        body = parseJson(jsonText(await readBody(c, limit, reserved)))
      } catch (err) {
        // JSON-RPC's parse error; a body too large or over the budget keeps its own answer.
        if (!(err instanceof MailroomError) || err.code !== 400) throw err
        return c.json(
          { jsonrpc: '2.0', error: { code: -32700, message: `Parse error: ${err.message}` }, id: null },
          400,
        )
      }
    }
    const outside = scopes && toolsOutside(body, scopes)
    if (outside) return insufficientScope(c, outside, scopes, door)
    const sessionId = c.req.header('mcp-session-id')
    if (sessionId) {
      const session = sessions.get(sessionId)
      // Another account's session is answered like a missing one.
      if (!session || session.accountId !== accountId) return rpcError(c, 404, 'Session not found')
      session.lastSeen = clock()
      return session.transport.handleRequest(c.req.raw, { parsedBody: body, authInfo })
    }
    if (c.req.method === 'GET')
      return rpcError(c, 405, 'Method not allowed: open a session first (initialize), then GET with Mcp-Session-Id')
    if (c.req.method !== 'POST') return rpcError(c, 400, 'Bad Request: Mcp-Session-Id header is required')

    // Only the method decides where the request goes; the transport validates the message itself.
    const initializing = (Array.isArray(body) ? body : [body]).some(
      (m) => (m as { method?: unknown } | null)?.method === 'initialize',
    )
    if (initializing) {
      const server = createMcpServer(services, callerOf)
      const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => {
          sessions.set(id, { transport, server, accountId, lastSeen: clock() })
          const own = [...sessions].filter(([, s]) => s.accountId === accountId)
          if (own.length > MCP_SESSIONS_PER_ACCOUNT) {
            const [oldest, s] = own.reduce((a, b) => (b[1].lastSeen < a[1].lastSeen ? b : a))
            sessions.delete(oldest)
            void s.server.close()
          }
        },
        onsessionclosed: (id) => void sessions.delete(id),
      })
      await server.connect(transport)
      return transport.handleRequest(c.req.raw, { parsedBody: body, authInfo })
    }
    // Session-less: a plain tool call is answered here; anything else gets a transport for this
    // one request, answered as plain JSON.
    const direct = directCall(c.req.raw.headers, body)
    if (direct) return c.json({ result: await call(direct.name, direct.args, caller), jsonrpc: '2.0', id: direct.id })
    // The transport's server is
    // taken from the idle ones (a server serves one transport at a time) and given back once
    // closed, after the handler has settled: closing sooner would abort the handler's signal.
    const server = idle.pop() ?? createMcpServer(services, callerOf)
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    })
    await server.connect(transport)
    const response = await transport.handleRequest(c.req.raw, { parsedBody: body, authInfo })
    setImmediate(() => void server.close().then(() => idle.length < MAX_IDLE_SERVERS && idle.push(server)))
    return response
  })

  return {
    async close() {
      clearInterval(sweep)
      await Promise.all([...sessions.values()].map((s) => s.server.close()))
      sessions.clear()
    },
  }
}

const NO_CREDENTIALS = 'send it in the X-API-KEY header, or authorize with OAuth (see WWW-Authenticate)'
const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]))

/** The first call of a message (or batch) to a tool that `scopes` do not allow, if any: the tool and the message's id. */
function toolsOutside(body: unknown, scopes: readonly string[]): { tool: AnyTool; id: unknown } | undefined {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!isObject(m) || m.method !== 'tools/call' || !isObject(m.params) || typeof m.params.name !== 'string') continue
    const tool = BY_NAME.get(m.params.name)
    if (tool && !mayCall(tool, scopes)) return { tool, id: m.id ?? null }
  }
}

/**
 * MCP authorization (2025-11-25), scope challenge: a 403 whose WWW-Authenticate names the scopes
 * the call needs (those held and the missing one), so that a client can ask its person for them.
 */
function insufficientScope(
  c: Context,
  { tool, id }: { tool: AnyTool; id: unknown },
  scopes: readonly string[],
  door: Door,
) {
  const wanted = [...new Set([...scopes, scopeOf(tool)])].join(' ')
  const e = outOfScope(tool)
  c.header('WWW-Authenticate', scopeChallenge(wanted, door.metadataUrl, e.message))
  return c.json({ jsonrpc: '2.0', error: { code: -32000, message: e.message, data: e.toJSON() }, id }, 403)
}

const only = (o: Record<string, unknown>, keys: readonly string[]) => Object.keys(o).every((k) => keys.includes(k))

/**
 * A session-less `tools/call` exactly as the SDK's transport would take it and answer with plain
 * JSON: one request, an integer or string id, params with a name and arguments (whatever their
 * types: the tool call refuses bad ones, as through the SDK), nothing else (no `_meta`, no task),
 * headers that pass the transport's checks. Such a call is answered from the registry directly: a
 * transport per request costs more than most tool calls. Anything else, errors included, goes to
 * the SDK, so that the answer is always the SDK's own.
 */
function directCall(
  headers: Headers,
  body: unknown,
): { id: string | number; name: unknown; args: unknown } | undefined {
  if (
    !isObject(body) ||
    body.jsonrpc !== '2.0' ||
    body.method !== 'tools/call' ||
    !only(body, ['jsonrpc', 'id', 'method', 'params'])
  )
    return
  const { id, params } = body
  if (
    !(typeof id === 'string' || Number.isSafeInteger(id)) ||
    !isObject(params) ||
    !only(params, ['name', 'arguments'])
  )
    return
  const accept = headers.get('accept') ?? ''
  const version = headers.get('mcp-protocol-version')
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return
  if (headers.get('content-type')?.split(';')[0].trim().toLowerCase() !== 'application/json') return
  if (version !== null && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return
  return { id: id as string | number, name: params.name, args: params.arguments }
}

function safeHostname(url: string): string {
  try {
    return new URL(url).hostname
  } catch {
    return ''
  }
}
