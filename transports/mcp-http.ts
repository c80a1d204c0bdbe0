import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js'
import type { Context, Hono } from 'hono'
import { randomUUID } from 'node:crypto'
import { MailroomError, unauthorized } from '../errors.js'
import type { ElicitationModes, PolicyHolder, SendPolicy } from '../storage/store.js'
import type { Services } from '../tools/define.js'
import { isObject } from './json-schema.js'
import { jsonText, parseJson, readBody, reserveBody } from './request-body.js'
import { createMcpServer, toolCaller, type CallerOf } from './mcp.js'
import { apiKeyOf, oauthTokenOf, type Authenticate, type Door, type Identity } from './auth.js'
import { mayCall, outOfScope, scopeChallenge, scopeOf } from './scopes.js'
import { parseToolset, serves, type Toolset } from './toolsets.js'
import { TOOLS } from '../tools/index.js'
import type { AnyTool } from '../tools/define.js'
import { answerOf, ELICITATION_DECIDER, elicitationModesOf, isElicitationAnswer, wakeAsker } from './mcp-elicit.js'

/** A session nobody used for this long is ended. */
export const MCP_SESSION_IDLE_MS = 30 * 60_000
/** Most sessions one account keeps open; opening one more ends its least recently used. */
export const MCP_SESSIONS_PER_ACCOUNT = 100
/**
 * A session's last use is written at most this often: in between, a request only reads its row,
 * and the idle time and the least recently used are known to the minute.
 */
export const MCP_SESSION_TOUCH_MS = 60_000
const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '::1', '[::1]']
/** At most this many idle servers are kept for the next requests (about their concurrency). */
const MAX_IDLE_SERVERS = 64

const callerOf: CallerOf = (extra) => ({
  accountId: (extra.authInfo?.extra?.accountId as number | undefined) ?? null,
  origin: (extra.authInfo?.extra?.origin as string | undefined) ?? '',
  sandbox: extra.authInfo?.extra?.sandbox === true,
  scopes: extra.authInfo?.extra?.scopes as string[] | undefined,
  toolset: extra.authInfo?.extra?.toolset as Toolset | undefined,
  holder: extra.authInfo?.extra?.holder as PolicyHolder | undefined,
  policy: extra.authInfo?.extra?.policy as SendPolicy | null | undefined,
  sessionId: extra.authInfo?.extra?.sessionId as string | undefined,
  elicitation: extra.authInfo?.extra?.elicitation as ElicitationModes | undefined,
})

const rpcError = (c: Context, status: 400 | 404 | 405, message: string) => {
  // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
  if (status === 405) c.header('Allow', 'POST, DELETE')
  return c.json({ jsonrpc: '2.0', error: { code: status === 404 ? -32001 : -32000, message }, id: null }, status)
}

/**
 * MCP over Streamable HTTP at /mcp. The API key is checked on every request before any JSON-RPC
 * is read. Clients that initialize get a session (Mcp-Session-Id; DELETE ends it), bound to the
 * account that opened it; clients that only POST are served without one. A session is a row in
 * the store, not a node's memory: every node serves every session, each request on its own.
 */
export function mountMcp(app: Hono, services: Services, authenticate: Authenticate): { close(): Promise<void> } {
  /** Servers of finished requests, ready for the next ones. */
  const idle: Server[] = []
  const { config, clock, store } = services
  const loopback = LOOPBACK_HOSTS.includes(config.http.host)
  const allowedHosts = new Set([...LOOPBACK_HOSTS, new URL(config.publicUrl).hostname])
  const call = toolCaller(services)
  const door: Door = {
    resources: [`${config.publicUrl}/mcp`, config.publicUrl],
    metadataUrl: `${config.publicUrl}/.well-known/oauth-protected-resource/mcp`,
  }

  /**
   * The session if it is live and the account's, recording its use. Another account's session is
   * answered like a missing one: a session id says nothing to whoever guesses or copies it.
   */
  const inSession = async (id: string, accountId: number) => {
    const session = await store.mcpSessions.get(id)
    const now = clock()
    if (!session || session.accountId !== accountId || now - session.usedAt > MCP_SESSION_IDLE_MS) return undefined
    if (now - session.usedAt >= MCP_SESSION_TOUCH_MS) await store.mcpSessions.touch(id, now)
    return session
  }

  /**
   * Has the SDK's transport answer one request, as plain JSON, on a server from the idle ones (a
   * server serves one transport at a time), given back once closed, after the handler has
   * settled: closing sooner would abort the handler's signal. With `sessionIdGenerator`, an
   * initialize is answered with a new session id. What a request leaves in its server is never
   * read by the next: an initialize's client name and capabilities, which mailroom never asks for.
   */
  const answer = async (request: Request, body: unknown, authInfo: AuthInfo, sessionIdGenerator?: () => string) => {
    const server = idle.pop() ?? createMcpServer(services, callerOf)
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator, enableJsonResponse: true })
    await server.connect(transport)
    const response = await transport.handleRequest(request, { parsedBody: body, authInfo })
    setImmediate(() => void server.close().then(() => idle.length < MAX_IDLE_SERVERS && idle.push(server)))
    return { response, sessionId: transport.sessionId }
  }

  /**
   * Has a server of its own answer a request on an SSE stream (the POST's response), so that a
   * tool call can write its question to the client there (elicitation, transports/mcp-elicit.ts)
   * before its result. The server stays open while the stream does, closed when it ends or the
   * client hangs up, and is never given to another request: its handler may still be waiting.
   */
  const answerOnStream = async (request: Request, body: unknown, authInfo: AuthInfo) => {
    const server = createMcpServer(services, callerOf)
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: false })
    await server.connect(transport)
    const response = await transport.handleRequest(request, { parsedBody: body, authInfo })
    const close = () => void server.close()
    if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
      close()
      return response
    }
    // `cancel` (a client that hung up) is in Node's streams, not yet in TypeScript's types.
    const ends = { flush: close, cancel: close } as Transformer<Uint8Array, Uint8Array>
    const stream = response.body.pipeThrough(new TransformStream(ends))
    return new Response(stream, { status: response.status, headers: response.headers })
  }

  /**
   * The person's answers to questions asked by any node: applied through the store, so that the
   * call waiting for them, wherever it runs, reads the decision; that call is woken at once when
   * it runs here. An id that is not a live question of the account is a 404: nothing changes.
   */
  const takeAnswers = async (
    c: Context,
    answers: { id: string; result?: unknown; error?: unknown }[],
    accountId: number,
  ) => {
    for (const m of answers) {
      const meant = answerOf(m.id, m)
      if (meant.apply === 'nothing') continue
      const hold = await store.holds.answer({
        elicitationId: m.id,
        accountId,
        action: meant.apply,
        by: ELICITATION_DECIDER,
        now: clock(),
      })
      if (!hold) return rpcError(c, 404, `no elicitation ${m.id}: it was answered, expired, or is another account's`)
      wakeAsker(m.id)
    }
    return c.body(null, 202)
  }

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
      if (err instanceof MailroomError && err.code === 401 && !oauthTokenOf(c))
        throw new MailroomError(401, unauthorized(NO_CREDENTIALS).message, { headers: err.headers })
      throw err
    }
    const { accountId, sandbox, scopes, holder, policy } = identity
    // Each request's own key or token decides, in a session too: a session is bound to an account,
    // not a key (an OAuth client refreshes its token, a new one each hour, within one session).
    // The tools the client asked for (`?tools=send,log`): an MCP client keeps the URL it was given
    // for every request of its session.
    const toolset = parseToolset(c.req.query('tools') ?? '')
    const caller = { accountId, origin: c.get('clientIp'), sandbox, scopes, toolset, holder, policy }
    const credential = apiKeyOf(c) ?? oauthTokenOf(c)!
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
    const outside = scopes && toolsOutside(body, scopes, toolset)
    if (outside) return insufficientScope(c, outside, scopes, door)
    // mailroom sends nothing a client did not ask for (a fixed tool list, no notifications, and a
    // question to the client only on the stream of the tool call it is about): it opens no stream
    // of its own. MCP 2025-06-18, Streamable HTTP, "Listening for Messages from the Server": a
    // server that offers none answers GET with 405.
    if (c.req.method === 'GET') return rpcError(c, 405, NO_STREAM)
    // Answers to our questions (elicitation) come back as POSTed JSON-RPC responses, to any node.
    const answers = c.req.method === 'POST' ? elicitationAnswers(body) : undefined
    if (answers) return takeAnswers(c, answers, accountId)
    // Only the method decides where the request goes; the transport validates the message itself.
    const initializing = (Array.isArray(body) ? body : [body]).some(
      (m) => (m as { method?: unknown } | null)?.method === 'initialize',
    )
    const sessionId = c.req.header('mcp-session-id')
    if (sessionId) {
      const session = await inSession(sessionId, accountId)
      if (!session) return rpcError(c, 404, 'Session not found')
      if (c.req.method === 'DELETE') {
        await store.mcpSessions.end(sessionId)
        return c.body(null, 200)
      }
      if (c.req.method !== 'POST') return rpcError(c, 405, 'Method not allowed: POST or DELETE a session')
      if (initializing) return rpcError(c, 400, 'Invalid Request: the session is initialized already')
      // A client that can be asked gets its tool calls answered on a stream, where a send that
      // holds its message asks the person before its result.
      if (session.elicitation && hasToolCall(body))
        return answerOnStream(c.req.raw, body, {
          ...authInfo,
          extra: { ...caller, sessionId, elicitation: session.elicitation },
        })
    } else {
      if (c.req.method !== 'POST') return rpcError(c, 400, 'Bad Request: Mcp-Session-Id header is required')
      if (initializing) {
        // The session is stored before its id is answered: the client's next request, whichever
        // node it reaches, finds it.
        const { response, sessionId: opened } = await answer(c.req.raw, body, authInfo, randomUUID)
        if (opened)
          await store.mcpSessions.open({
            id: opened,
            accountId,
            now: clock(),
            keep: MCP_SESSIONS_PER_ACCOUNT,
            // What the client can be asked (elicitation), for its session's tool calls on any node.
            elicitation: elicitationModesOf(initializeOf(body)?.capabilities),
          })
        return response
      }
    }
    // In a session or not, a plain tool call is answered here; anything else by the SDK's transport.
    const direct = directCall(c.req.raw.headers, body)
    if (direct) return c.json({ result: await call(direct.name, direct.args, caller), jsonrpc: '2.0', id: direct.id })
    return (await answer(c.req.raw, body, authInfo)).response
  })

  return {
    async close() {
      idle.length = 0
    },
  }
}

const NO_STREAM =
  'Method not allowed: mailroom sends nothing unasked, so it opens no stream; each request is answered in its POST response'

const NO_CREDENTIALS =
  'send it in the X-API-KEY header (or as Authorization: Bearer mr_…), or authorize with OAuth (see WWW-Authenticate)'
const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]))

/**
 * The first call of a message (or batch) to a tool that `scopes` do not allow, if any: the tool and
 * the message's id. A tool outside the connection's toolset is refused as an unknown one instead.
 */
function toolsOutside(
  body: unknown,
  scopes: readonly string[],
  toolset: Toolset | undefined,
): { tool: AnyTool; id: unknown } | undefined {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!isObject(m) || m.method !== 'tools/call' || !isObject(m.params) || typeof m.params.name !== 'string') continue
    const tool = BY_NAME.get(m.params.name)
    if (tool && serves(toolset, tool.name) && !mayCall(tool, scopes)) return { tool, id: m.id ?? null }
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

const messagesOf = (body: unknown): unknown[] => (Array.isArray(body) ? body : [body])

/** The params of the body's initialize request, if it has one. */
function initializeOf(body: unknown): Record<string, unknown> | undefined {
  const init = messagesOf(body).find((m) => isObject(m) && m.method === 'initialize')
  return isObject(init) && isObject(init.params) ? init.params : undefined
}

const hasToolCall = (body: unknown) => messagesOf(body).some((m) => isObject(m) && m.method === 'tools/call')

/** The body's messages when every one is an answer to one of our questions (elicitation). */
function elicitationAnswers(body: unknown) {
  const messages = messagesOf(body)
  return messages.length > 0 && messages.every(isElicitationAnswer) ? messages : undefined
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
