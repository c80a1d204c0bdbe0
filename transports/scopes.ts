import { MailroomError } from '../errors.js'
import type { AnyTool } from '../tools/define.js'

/** The OAuth scopes of mailroom, as the authorization page and the metadata name them. */
export const SCOPES = {
  'mail:read': 'read the mail orders, the delivery log, statistics, deny rules, blocks and webhooks',
  'mail:send': 'send mail as the account',
  'mail:manage': 'change deny rules, block lists and webhooks',
} as const
export type Scope = keyof typeof SCOPES
export const SCOPE_NAMES = Object.keys(SCOPES) as Scope[]

/**
 * The scope each tool needs, decided by its annotations: the first row that matches. The sends
 * are the open-world writes that take an idempotency key; every other write (rules, blocks,
 * webhooks: the destructive ones and their counterparts) is management.
 */
const SCOPE_RULES: readonly [string, (tool: AnyTool) => boolean, Scope][] = [
  ['read-only', (t) => t.annotations.readOnlyHint, 'mail:read'],
  ['sends mail', (t) => t.annotations.openWorldHint && t.idempotencyKey === true, 'mail:send'],
  ['any other change', () => true, 'mail:manage'],
]

/** The scope a tool needs. */
export const scopeOf = (tool: AnyTool): Scope => SCOPE_RULES.find(([, matches]) => matches(tool))![2]

/** Whether a caller with `scopes` (undefined: an API key, which may do everything) may call the tool. */
export const mayCall = (tool: AnyTool, scopes: readonly string[] | undefined): boolean =>
  scopes === undefined || tool.public === true || scopes.includes(scopeOf(tool))

/** The refusal of a tool outside a token's scopes: a 403 naming the scope it needs. */
export const outOfScope = (tool: AnyTool, headers?: Record<string, string>) =>
  new MailroomError(
    403,
    `${tool.name} needs the ${scopeOf(tool)} scope, which this access token was not granted; authorize again with it`,
    { headers },
  )

/**
 * The WWW-Authenticate challenge of a call outside a token's scopes (RFC 6750 §3): the scopes to
 * ask for, where the resource's metadata is, and what went wrong, when given.
 */
export const scopeChallenge = (scope: string, metadataUrl: string, description?: string) =>
  `Bearer error="insufficient_scope", scope="${scope}", resource_metadata="${metadataUrl}"${
    description ? `, error_description="${description}"` : ''
  }`
