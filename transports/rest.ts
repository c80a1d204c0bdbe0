import type { Context, Hono } from 'hono'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import qs from 'qs'
import { z } from 'zod'
import { MailroomError, badInput } from '../errors.js'
import type { AnyTool, Services, ToolContext } from '../tools/define.js'
import { checkIdempotencyKey, runTool } from '../tools/idempotency.js'
import { TOOLS } from '../tools/index.js'
import type { Reservation } from '../relay/byte-budget.js'
import type { Authenticate, Door, Identity } from './auth.js'
import { mayCall, outOfScope, scopeChallenge, scopeOf } from './scopes.js'
import { parseInput } from './input.js'
import { jsonText, parseJson, readBody, reserveBody, SMALL_BODY_LIMIT, startsWithBom } from './request-body.js'

/** `/mail/{id}` → `/mail/:id` */
export const honoPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1')

/**
 * Mounts one route per tool, derived from the registry: method and path from the tool, input
 * assembled from path, query and body, checked by the tool's schema, result rendered as JSON.
 * Static paths go first so that `/mail/log` is never read as `/mail/{id}`.
 */
export function mountRest(
  app: Hono,
  services: Services,
  authenticate: Authenticate,
  tools: readonly AnyTool[] = TOOLS,
): void {
  const door: Door = {
    resources: [services.config.publicUrl],
    metadataUrl: `${services.config.publicUrl}/.well-known/oauth-protected-resource`,
  }
  const { bodyLimit } = services.config.http
  const byPath = new Map<string, AnyTool[]>()
  for (const tool of [...tools].sort((a, b) => paramCount(a.http.path) - paramCount(b.http.path))) {
    byPath.set(tool.http.path, [...(byPath.get(tool.http.path) ?? []), tool])
  }
  for (const [path, pathTools] of byPath) {
    for (const tool of pathTools) {
      const coerce = coercerFor(tool.input)
      const { message } = tool.http
      /** The body's limit, and for a message the budget's reservation, taken before it is read. */
      const budgetOf = (c: Context, owner: Identity | null): [number, Reservation?] =>
        message && owner
          ? [bodyLimit, reserveBody(c, services.budget, owner.accountId, bodyLimit)]
          : [message ? bodyLimit : SMALL_BODY_LIMIT]
      app.on(tool.http.method, honoPath(path), async (c) => {
        const owner = tool.public ? null : await authenticate(c, door)
        if (owner && !mayCall(tool, owner.scopes))
          throw outOfScope(tool, { 'WWW-Authenticate': scopeChallenge(scopeOf(tool), door.metadataUrl) })
        const idempotencyKey = tool.idempotencyKey ? idempotencyKeyOf(c) : undefined
        const raw = {
          ...queryOf(c),
          ...(tool.http.method === 'POST' ? await bodyOf(c, ...budgetOf(c, owner)) : {}),
          ...c.req.param(),
        }
        const input = parseInput(tool, coerce(raw))
        const ctx: ToolContext = {
          ...services,
          accountId: owner?.accountId ?? null,
          origin: c.get('clientIp'),
          sandbox: owner?.sandbox ?? false,
          scopes: owner?.scopes,
          holder: owner?.holder,
          policy: owner?.policy,
          idempotencyKey,
        }
        const { status, result } = await runTool(tool, input, ctx)
        if (tool.http.download) return download(result as Parameters<typeof download>[0])
        // A text result (pingServer's) is plain text unless the client asks for JSON, as the
        // OpenAPI document lists both for it.
        if (typeof result === 'string' && !prefersJson(c)) return c.text(result, status as ContentfulStatusCode)
        return c.json(result, status as ContentfulStatusCode)
      })
    }
    // Another method on this path: 405 with the methods it has (RFC 9110 §15.5.6), before a path
    // with a parameter (`/mail/{id}`) can take it.
    const methods = pathTools.map((t) => t.http.method)
    const allow = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].join(', ')
    app.all(honoPath(path), (c) => {
      throw new MailroomError(405, `${c.req.method} is not allowed on ${c.req.path}; use ${methods.join(' or ')}`, {
        headers: { Allow: allow },
      })
    })
  }
}

/** A file result (HttpBinding.download) as its bytes. */
function download(file: { content: string; contentType: string; filename: string | null }): Response {
  const headers: Record<string, string> = {
    'content-type': file.contentType,
    'x-content-type-options': 'nosniff',
    // Saved, never shown in the browser's origin (an HTML attachment would run there).
    'content-disposition': `attachment${file.filename ? `; filename*=UTF-8''${encodeURIComponent(file.filename)}` : ''}`,
  }
  return new Response(Buffer.from(file.content, 'base64'), { headers })
}

/** The request's Idempotency-Key (IETF draft), taken as sent (the draft's quotes too), if it has one. */
function idempotencyKeyOf(c: Context): string | undefined {
  const value = c.req.header('idempotency-key')
  return value === undefined ? undefined : checkIdempotencyKey('Idempotency-Key', value)
}

const paramCount = (path: string) => (path.match(/\{/g) ?? []).length

function prefersJson(c: Context): boolean {
  const accept = c.req.header('accept') ?? ''
  return accept.includes('application/json') && !accept.includes('text/plain')
}

/**
 * The query parameters. One given without a value (`?from=&limit=`, as some clients write every
 * parameter they know) is taken as not given, whatever its type: its default applies.
 */
function queryOf(c: Context): Record<string, unknown> {
  // Most requests have no query string: they are spared parsing the URL.
  const url = c.req.url
  const search = url.includes('?') ? new URL(url).search.slice(1) : ''
  if (!search) return {}
  return Object.fromEntries(Object.entries(parseForm(search)).filter(([, v]) => v !== ''))
}

/** Most fields of a form, and most items of one list in it: qs's own limits, refused instead of cut. */
export const FORM_FIELD_LIMIT = 1000
const FORM_OPTIONS = {
  depth: 5,
  arrayLimit: FORM_FIELD_LIMIT,
  parameterLimit: FORM_FIELD_LIMIT,
  // Past its limits qs would silently drop the rest: a `bcc[0][email]` after 1000 other fields
  // would be answered 200 and never sent.
  throwOnLimitExceeded: true,
}
const tooManyFields = () =>
  badInput(
    `the request has more than ${FORM_FIELD_LIMIT} fields, or more than ${FORM_FIELD_LIMIT} items in a list; the limit is ${FORM_FIELD_LIMIT}`,
  )

/** A form (a query string, or fields already split out of multipart) in bracket notation, as an object. */
function parseForm(form: string | Record<string, string | string[]>): Record<string, unknown> {
  try {
    return qs.parse(form as string, FORM_OPTIONS)
  } catch (err) {
    if (err instanceof RangeError) throw tooManyFields()
    throw err
  }
}

const unsupported = (type: string) =>
  new MailroomError(
    415,
    `content type ${type} is not supported; send application/json, application/x-www-form-urlencoded or multipart/form-data`,
  )

const JSON_OR_FORM = ['', 'application/x-www-form-urlencoded', 'text/plain']

/**
 * A request body as an object: JSON, a form (bracket notation), or multipart. An unsupported
 * type is refused before the body is read.
 */
async function bodyOf(c: Context, limit: number, reservation?: Reservation): Promise<Record<string, unknown>> {
  const type = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase()
  const declaredJson = type === 'application/json' || type.endsWith('+json')
  if (type === 'multipart/form-data')
    return multipartOf(await readBody(c, limit, reservation), c.req.header('content-type')!)
  if (!declaredJson && !JSON_OR_FORM.includes(type)) throw unsupported(type)
  let bytes: Buffer | null = await readBody(c, limit, reservation)
  if (isBlank(bytes)) return {}
  const json = declaredJson || looksJson(bytes)
  if (!json && type === 'text/plain') throw unsupported(type)
  const text = json ? jsonText(bytes) : bytes.toString('utf8')
  // Dropped before the text is parsed: a message is held as bytes, then text, then parsed, never all three at once.
  bytes = null
  if (!json) return parseForm(text)
  const parsed = parseJson(text)
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw badInput('the request body must be a JSON object')
  return parsed as Record<string, unknown>
}

/** Multipart fields, files as their text, then read in bracket notation like a form. */
async function multipartOf(bytes: Buffer, contentType: string): Promise<Record<string, unknown>> {
  let form: FormData
  try {
    form = await new Response(bytes as Uint8Array<ArrayBuffer>, {
      headers: { 'content-type': contentType },
    }).formData()
  } catch {
    throw badInput('the request body is not valid multipart/form-data')
  }
  const fields: Record<string, string | string[]> = {}
  let count = 0
  for (const [name, value] of form) {
    if (++count > FORM_FIELD_LIMIT) throw tooManyFields()
    const text = typeof value === 'string' ? value : await value.text()
    const before = fields[name]
    fields[name] = before === undefined ? text : Array.isArray(before) ? [...before, text] : [before, text]
  }
  return parseForm(fields)
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d])
const isBlank = (bytes: Buffer) => bytes.every((b) => WHITESPACE.has(b))

/** Whether a body of no declared JSON type is JSON anyway: its first character, past whitespace and a byte-order mark, opens an object or array. */
function looksJson(bytes: Buffer): boolean {
  let i = startsWithBom(bytes) ? 3 : 0
  while (WHITESPACE.has(bytes[i])) i++
  return bytes[i] === 0x7b || bytes[i] === 0x5b
}

type JsonSchema = {
  type?: string | string[]
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  $ref?: string
  properties?: Record<string, JsonSchema>
  $defs?: Record<string, JsonSchema>
}

/**
 * Query strings and forms carry only text. This turns the text of fields whose schema takes a
 * number into numbers (`id=66`, `limit=10`, `startDate=1700000000`) before the schema sees them;
 * a field that also takes text (a date) is converted only when it is all digits.
 */
export function coercerFor(input: z.ZodObject): Coercer {
  let coercer = COERCERS.get(input)
  if (!coercer) COERCERS.set(input, (coercer = makeCoercer(input)))
  return coercer
}

type Coercer = (raw: Record<string, unknown>) => Record<string, unknown>

/** One coercer per schema, whichever app asks: converting a schema to JSON Schema is slow next to the rest of an app's setup. */
const COERCERS = new WeakMap<z.ZodObject, Coercer>()

function makeCoercer(input: z.ZodObject): Coercer {
  const schema = z.toJSONSchema(input, { io: 'input', unrepresentable: 'any' }) as JsonSchema
  const defs = schema.$defs ?? {}
  const typesOf = (s: JsonSchema): string[] => {
    if (s.$ref) return typesOf(defs[s.$ref.split('/').pop()!] ?? {})
    const own = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type]
    return [...own, ...[...(s.anyOf ?? []), ...(s.oneOf ?? [])].flatMap(typesOf)]
  }
  const numeric = new Map<string, boolean>()
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const types = typesOf(prop)
    if (types.includes('integer') || types.includes('number')) numeric.set(name, types.includes('string'))
  }
  return (raw) => {
    const out = { ...raw }
    for (const [name, takesText] of numeric) {
      const v = out[name]
      if (typeof v !== 'string') continue
      if (v.trim() === '') delete out[name]
      else if (takesText ? /^\d+$/.test(v) : /^-?\d+(\.\d+)?$/.test(v.trim())) out[name] = Number(v)
    }
    return out
  }
}
