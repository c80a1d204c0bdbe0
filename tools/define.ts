import type { Logger } from 'pino'
import type { z } from 'zod'
import type { Config } from '../config.js'
import { unauthorized } from '../errors.js'
import type { ByteBudget } from '../relay/byte-budget.js'
import type { Relay } from '../relay/pipeline.js'
import type { PolicyHolder, SendPolicy, Store } from '../storage/store.js'

/** What every handler can use; injected, never reached for. */
export interface Services {
  store: Store
  relay: Relay
  config: Config
  logger: Logger
  clock: () => number
  /** Message bytes the doors hold in memory at once (relay/byte-budget.ts). */
  budget: ByteBudget
}

/** A handler's context: the services plus who is calling and from where. */
export interface ToolContext extends Services {
  /** The authenticated account; null only for public tools. */
  accountId: number | null
  /** The client's IP address. */
  origin: string
  /** The call's idempotency key, checked (tools/idempotency.ts), for tools that take one. */
  idempotencyKey?: string
  /** Whether the caller's API key is a sandbox key: its sends are sandbox mail (relay/sandbox.ts). */
  sandbox?: boolean
  /** The scopes of the caller's OAuth access token; undefined for an API key, which may do everything. */
  scopes?: readonly string[]
  /** What the caller's send policy belongs to (its API key or OAuth grant); undefined: no policy applies. */
  holder?: PolicyHolder
  /** The caller's send policy (docs/approval.md); null or undefined: none. */
  policy?: SendPolicy | null
  /** Asks the person at the MCP client to approve a held message (elicitation); only when the client can be asked. */
  ask?: AskPerson
}

/** What the person at the MCP client is asked about a held message. */
export interface ApprovalQuestion {
  txid: string
  from: string
  to: string[]
  subject: string | null
  /** The first lines of its text (at most 5 lines, 500 characters). */
  preview: string
  /** Why it needs approval. */
  reason: string
  approvalUrl: string
  expiresAt: number
}

/** What became of a held message once its person was asked (any node may have applied the answer). */
export type ApprovalOutcome = 'approved' | 'rejected' | 'held'
export type AskPerson = (question: ApprovalQuestion) => Promise<ApprovalOutcome>

export interface ToolAnnotations {
  readOnlyHint: boolean
  destructiveHint: boolean
  idempotentHint: boolean
  openWorldHint: boolean
}

export interface HttpBinding {
  method: 'GET' | 'POST' | 'DELETE'
  /** OpenAPI-style path; `{name}` segments are path parameters. */
  path: string
  /** Request body content types, for POST. */
  bodyTypes?: string[]
  /**
   * The body carries a message: it may be as large as MAILROOM_HTTP_BODY_LIMIT, and the door
   * reserves it in the byte budget before reading it. Any other body is a small one.
   */
  message?: true
  /**
   * The result is a file (`content` in base64, `contentType`, `filename`): REST answers its bytes
   * with its type; MCP and stdio the JSON.
   */
  download?: true
}

export interface Tool<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> {
  name: string
  title: string
  description: string
  http: HttpBinding
  annotations: ToolAnnotations
  input: I
  output: O
  /** No API key needed (pingServer). */
  public?: boolean
  /** Refusals the tool can answer besides 401 (and 413/415 for request bodies), for the documents. */
  errors: (400 | 403 | 404 | 409 | 422 | 429)[]
  /**
   * Takes an idempotency key (REST: the Idempotency-Key header; MCP: the idempotencyKey argument):
   * a retried call with it runs once (tools/idempotency.ts).
   */
  idempotencyKey?: boolean
  /** MCP results are objects: an output that is not one is returned as `{[resultKey]: output}`. */
  resultKey?: string
  handler: (input: z.output<I>, ctx: ToolContext) => Promise<z.input<O>>
}

// biome-ignore lint/suspicious/noExplicitAny: the registry holds tools of every input and output type
export type AnyTool = Tool<any, any>

export function defineTool<I extends z.ZodObject, O extends z.ZodType>(tool: Tool<I, O>): Tool<I, O> {
  return tool
}

/** The calling account, for tools that need one. */
export function accountOf(ctx: ToolContext): number {
  if (ctx.accountId === null) throw unauthorized()
  return ctx.accountId
}

export const JSON_AND_FORM = ['application/json', 'application/x-www-form-urlencoded']
