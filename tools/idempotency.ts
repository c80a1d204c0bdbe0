import { createHash, randomUUID } from 'node:crypto'
import { z } from 'zod'
import { MailroomError, badInput } from '../errors.js'
import { accountOf, type AnyTool, type ToolContext } from './define.js'

/**
 * How long a key answers again with its first response. The IETF Idempotency-Key draft leaves the
 * expiry to the server; a day covers an agent's retries and a client's restart.
 */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000
/**
 * A key still pending after this long belongs to a request that died (a crash mid-request, a
 * lost node): a send is answered within seconds, and the key must not stay blocked for the day.
 */
export const IDEMPOTENCY_STALE_MS = 2 * 60_000

/** The MCP argument of the tools that take a key, as it is listed (the check is checkIdempotencyKey's). */
export const IDEMPOTENCY_ARGUMENT = 'idempotencyKey'
export const IdempotencyKeyArgument = z.string().min(1).max(255)

const RULE = 'a key is 1 to 255 printable ASCII characters'

/**
 * A sandbox caller's keys are held apart from the account's real ones: a rehearsal with a sandbox
 * key must never answer a later real send with its result (nothing would be sent). A tab cannot
 * be in a checked key, so no real key can be written to meet a sandbox one.
 */
const heldKey = (key: string, sandbox: boolean | undefined) => (sandbox ? `sandbox\t${key}` : key)

/** A key as given (the Idempotency-Key header, or the MCP argument named `field`), or a 400 naming `field`. */
export function checkIdempotencyKey(field: string, value: unknown): string {
  if (typeof value !== 'string') throw badInput(`${field}: expected a string; ${RULE}`)
  if (value.length === 0) throw badInput(`${field}: is empty; ${RULE}`)
  if (value.length > 255) throw badInput(`${field}: is ${value.length} characters long; ${RULE}`)
  const bad = /[^\x20-\x7e]/.exec(value)
  if (bad) {
    const code = bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')
    throw badInput(`${field}: holds U+${code} at position ${bad.index + 1}; ${RULE}`)
  }
  return value
}

/** What a tool call answered: its status and result, and whether they are an earlier call's. */
export interface ToolAnswer {
  status: number
  result: unknown
  replayed: boolean
}

/**
 * Runs a tool's handler on its checked input, as every door does. A call of a tool that takes an
 * idempotency key, with one (`ctx.idempotencyKey`), runs at most once per account and key (a
 * sandbox caller's keys apart from the real ones) within IDEMPOTENCY_WINDOW_MS: a later call with
 * the same tool and input answers the first one's response; one with another is a 422, and one
 * while the first is under way a 409. A refusal or
 * failure of the first call frees the key, so that the corrected call, or the retry, can run.
 */
export async function runTool(tool: AnyTool, input: unknown, ctx: ToolContext): Promise<ToolAnswer> {
  const key = tool.idempotencyKey ? ctx.idempotencyKey : undefined
  if (key === undefined) return { status: 200, result: await tool.handler(input, ctx), replayed: false }
  const hold = { accountId: accountOf(ctx), key: heldKey(key, ctx.sandbox), token: randomUUID() }
  const now = ctx.clock()
  const claim = await ctx.store.idempotency.begin({
    ...hold,
    fingerprint: fingerprintOf(tool, input),
    now,
    expiredBefore: now - IDEMPOTENCY_WINDOW_MS,
    staleBefore: now - IDEMPOTENCY_STALE_MS,
  })
  if (claim.state === 'mismatch')
    throw new MailroomError(
      422,
      'idempotency key: already used within 24 hours for a different request (another tool or other input); use a new key for a new request',
    )
  if (claim.state === 'pending')
    throw new MailroomError(
      409,
      'idempotency key: the first request with this key is still being processed; retry shortly',
      {
        headers: { 'Retry-After': '1' },
      },
    )
  if (claim.state === 'done') {
    ctx.logger.info({ tool: tool.name, status: claim.status }, 'answered a repeated request with its first response')
    return { status: claim.status, result: JSON.parse(claim.body), replayed: true }
  }
  let result: unknown
  try {
    result = await tool.handler(input, ctx)
  } catch (err) {
    // A refusal is not remembered: the corrected request may use the key. Nor is a failure (a
    // 500 comes before a message is committed), so that the retry the key is for goes through.
    await ctx.store.idempotency
      .abandon(hold)
      .catch((e) => ctx.logger.error({ err: e, tool: tool.name }, 'could not free an idempotency key'))
    throw err
  }
  // The work is done: its answer stands even if it cannot be recorded (the key then stays pending
  // until it is stale, and a retry after that would run again).
  try {
    if (!(await ctx.store.idempotency.finish({ ...hold, status: 200, body: JSON.stringify(result) })))
      ctx.logger.warn({ tool: tool.name }, 'an idempotency key was taken over before its request was answered')
  } catch (err) {
    ctx.logger.error({ err, tool: tool.name }, 'could not record the response of an idempotency key')
  }
  return { status: 200, result, replayed: false }
}

/** SHA-256 of the tool's name and its checked input, keys sorted: the same request in JSON or a form is the same. */
export function fingerprintOf(tool: AnyTool, input: unknown): string {
  return createHash('sha256').update(tool.name).update('\n').update(canonicalJson(input)).digest('hex')
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const fields = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
