import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import {
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
  type Tool as McpTool,
} from '@modelcontextprotocol/sdk/types.js'
import { didYouMean } from '../did-you-mean.js'
import { asMailroomError, badInput, type MailroomError, unauthorized } from '../errors.js'
import { PACKAGE } from '../package-info.js'
import { SANDBOX_DOMAIN } from '../relay/sandbox.js'
import type { AnyTool, AskPerson, Services, ToolAnnotations, ToolContext } from '../tools/define.js'
import { checkIdempotencyKey, IDEMPOTENCY_ARGUMENT, runTool } from '../tools/idempotency.js'
import { TOOLS } from '../tools/index.js'
import { isObject, mcpInputSchema, mcpOutputSchema, structuredResult } from './json-schema.js'
import { parseInput } from './input.js'
import { mayCall, outOfScope } from './scopes.js'
import { notServed, serves, type Toolset } from './toolsets.js'
import type { ElicitationModes, PolicyHolder, SendPolicy } from '../storage/store.js'
import { askVia } from './mcp-elicit.js'

export const MCP_PROTOCOL_VERSION = '2025-06-18'

let validator: AjvJsonSchemaValidator | undefined

export const MCP_INSTRUCTIONS =
  'mailroom relays email to real recipients. Send with sendMail (bare addresses), sendAdvMail (names, cc, ' +
  'bcc, attachments) or rawMail (a message you built). Each send returns its transaction id as `text`: pass ' +
  'it as `mailid` to viewMailLog to see whether each recipient was delivered. getMailOrders lists the ' +
  'sending accounts (mail orders); `id` in the sends and viewMailLog is one of them, by default the first ' +
  'active one. getRules/addRule/deleteRule manage deny rules; getMailBlocks/delistBlock the spam-filter blocks. ' +
  'With a sandbox API key (or order) nothing leaves the server, and viewMailLog shows each recipient delivered, ' +
  `but bounce@${SANDBOX_DOMAIN} bounces (550 5.1.1, a report to the sender) and defer@${SANDBOX_DOMAIN} is ` +
  'deferred once, then delivered: rehearse every outcome there. Under a send policy a send may answer ' +
  "`status: 'held'`: nothing is sent until a person approves it at `approvalUrl` (give them the link; do not " +
  'send it again); a client that supports elicitation has its person asked in the conversation first. A 429 ' +
  'says when the next send is possible.'

/**
 * Who is calling: resolved per request (HTTP: from its API key or OAuth token) or fixed (local
 * stdio). `scopes`: an OAuth token's, which limit the tools it sees and calls; none for a key.
 * `toolset`: the tools the connection asked for (transports/toolsets.ts); none for every tool.
 */
export type Caller = {
  accountId: number | null
  origin: string
  sandbox?: boolean
  scopes?: string[]
  toolset?: Toolset
  /** The caller's send policy and what it belongs to (docs/approval.md). */
  holder?: PolicyHolder
  policy?: SendPolicy | null
  /**
   * The MCP session's id, and the elicitation modes its client declared at initialize: set only
   * where a question can reach the client (a tools/call answered on its SSE stream).
   */
  sessionId?: string
  elicitation?: ElicitationModes | null
  /** Asks the person at the client about a held message (transports/mcp-elicit.ts). */
  ask?: AskPerson
}
export type CallerOf = (extra: { authInfo?: { extra?: Record<string, unknown> } }) => Caller

/** The MCP description of a tool: title, description, flat input schema, object output schema, its hints. */
export function mcpToolOf(tool: AnyTool): McpTool {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: mcpInputSchema(tool) as McpTool['inputSchema'],
    outputSchema: mcpOutputSchema(tool) as McpTool['outputSchema'],
    annotations: hintsOf(tool.annotations),
  }
}

/**
 * The hints that say something: MCP reads destructiveHint and idempotentHint only for a tool that
 * is not read-only (ToolAnnotations, protocol 2025-06-18). The title is the tool's own `title`.
 */
function hintsOf(hints: ToolAnnotations): McpTool['annotations'] {
  if (!hints.readOnlyHint) return hints
  const { destructiveHint: _d, idempotentHint: _i, ...readOnly } = hints
  return readOnly
}

const LISTS = new WeakMap<readonly AnyTool[], McpTool[]>()
/** The MCP tool list of a registry, computed once: session-less clients get a new server per request. */
export function mcpToolsOf(tools: readonly AnyTool[]): McpTool[] {
  let listed = LISTS.get(tools)
  if (!listed) LISTS.set(tools, (listed = tools.map(mcpToolOf)))
  return listed
}

/**
 * Runs a tool for MCP: its result as structured content (and JSON text), an error as `isError`
 * with `{code, message}`. `name` and `args` are taken as the client sent them, so that a name that
 * is not a string or arguments that are not an object are a 400 like any other bad argument.
 */
export async function callTool(
  tool: AnyTool | undefined,
  name: unknown,
  args: unknown,
  ctx: ToolContext,
): Promise<CallToolResult> {
  try {
    if (typeof name !== 'string')
      throw badInput(name === undefined ? 'name: is required' : 'name: expected the name of a tool, a string')
    if (!tool) throw badInput(`name: no tool named ${name}`)
    if (args !== undefined && !isObject(args)) throw badInput('arguments: expected an object of named arguments')
    refuseUnknownArguments(tool, args)
    // The idempotency key is the door's, not the tool's input: it travels in the context.
    const { [IDEMPOTENCY_ARGUMENT]: key, ...rest } = args ?? {}
    const idempotencyKey = key === undefined ? undefined : checkIdempotencyKey(IDEMPOTENCY_ARGUMENT, key)
    const { result } = await runTool(tool, parseInput(tool, rest), { ...ctx, idempotencyKey })
    const structured = structuredResult(tool, result)
    return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured }
  } catch (err) {
    const e = asMailroomError(err)
    if (e.code === 500) ctx.logger.error({ err, tool: name }, 'internal error')
    return { isError: true, content: [{ type: 'text', text: JSON.stringify(e.toJSON()) }] }
  }
}

/**
 * An argument the tool does not have is a 400 naming it and the tool's arguments: ignoring it (as
 * the REST door ignores unknown fields, for clients of the hosted service) would let a misspelt
 * `mailId` answer with another message's log, or a `bcc` that sendMail does not take go unsent.
 */
function refuseUnknownArguments(tool: AnyTool, args: unknown): void {
  if (!isObject(args)) return
  const known = [...Object.keys(tool.input.shape), ...(tool.idempotencyKey ? [IDEMPOTENCY_ARGUMENT] : [])]
  const unknown = Object.keys(args).filter((k) => !known.includes(k))
  if (unknown.length) {
    const names = unknown.map((k) => {
      const like = didYouMean(k, known)
      return like ? `${k} (did you mean ${like}?)` : k
    })
    throw badInput(
      `${unknown[0]}: ${tool.name} has no argument ${names.join(', ')}; its arguments are ${known.join(', ')}`,
    )
  }
}

/**
 * An MCP server over the tool registry, written on the SDK's low-level Server: McpServer would
 * advertise `listChanged: true` and word input errors its own way, while the contract wants a
 * fixed tool list and the REST `{code, message}` in every error. Handlers run in process.
 */
export function createMcpServer(services: Services, callerOf: CallerOf, tools: readonly AnyTool[] = TOOLS): Server {
  const server = new Server(
    { name: PACKAGE.product, title: 'mailroom', version: PACKAGE.version },
    // One schema validator for every server: building one (an Ajv instance) per session-less
    // request cost more than the tool call itself.
    {
      capabilities: { tools: { listChanged: false } },
      instructions: MCP_INSTRUCTIONS,
      jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()),
    },
  )
  const listed = mcpToolsOf(tools)
  const call = toolCaller(services, tools)
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    const { scopes, toolset } = callerOf(extra)
    if (!scopes && !toolset) return { tools: listed }
    return { tools: listed.filter((_tool, i) => mayCall(tools[i], scopes) && serves(toolset, tools[i].name)) }
  })
  answerToolCalls(server, (params, extra) => {
    const caller = callerOf(extra)
    // A client that can be asked is asked about a message its send holds, on this call's stream.
    const ask = caller.elicitation ? askVia(server, extra, caller.elicitation, services) : undefined
    return call(params.name, params.arguments, ask ? { ...caller, ask } : caller)
  })
  return server
}

/**
 * Has `server` answer `tools/call` from the request's params as sent. A handler registered under
 * CallToolRequestSchema never sees a `name` that is not a string or `arguments` that are not an
 * object: the SDK's check answers those with -32603 Internal error and a dump of its schema's
 * issues. The fallback handler gets the request unchecked; any other method without a handler is
 * still "Method not found".
 */
export function answerToolCalls(
  server: Server,
  answer: (
    params: Record<string, unknown>,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ) => Promise<CallToolResult>,
): void {
  server.fallbackRequestHandler = async (request, extra) => {
    if (request.method !== 'tools/call') throw new McpError(ErrorCode.MethodNotFound, 'Method not found')
    return answer(request.params ?? {}, extra)
  }
}

const errorResult = (e: MailroomError): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify(e.toJSON()) }],
})

/** What answers `tools/call` for a caller: a tool other than the public ones needs an account. */
export function toolCaller(
  services: Services,
  tools: readonly AnyTool[] = TOOLS,
): (name: unknown, args: unknown, caller: Caller) => Promise<CallToolResult> {
  const byName = new Map(tools.map((t) => [t.name, t]))
  return async (name, args, caller) => {
    const tool = typeof name === 'string' ? byName.get(name) : undefined
    if (tool && !serves(caller.toolset, tool.name)) return errorResult(notServed(caller.toolset!, tool.name))
    if (tool && !tool.public && caller.accountId === null) return errorResult(unauthorized())
    if (tool && !mayCall(tool, caller.scopes)) return errorResult(outOfScope(tool))
    return callTool(tool, name, args, { ...services, ...caller })
  }
}
