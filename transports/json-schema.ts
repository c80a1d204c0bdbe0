import { z } from 'zod'
import type { AnyTool } from '../tools/define.js'
import { IDEMPOTENCY_ARGUMENT, IdempotencyKeyArgument } from '../tools/idempotency.js'

export type JsonSchema = Record<string, unknown>

/** A zod schema as a self-contained JSON Schema (no $schema, no $defs), for MCP or OpenAPI 3.0. */
export function jsonSchemaOf(
  schema: z.ZodType,
  io: 'input' | 'output',
  target: 'draft-2020-12' | 'openapi-3.0' = 'draft-2020-12',
): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, target, unrepresentable: 'any' }) as JsonSchema
  return rest
}

/** The MCP input schema of a tool: its arguments, compact, none other allowed. */
export function mcpInputSchema(tool: AnyTool): JsonSchema {
  // Unknown arguments are refused (callTool): an agent's misspelt argument must not be dropped unseen.
  const schema = compactSchema(jsonSchemaOf(tool.input, 'input'))
  // The idempotency key is an argument of MCP's only: REST takes it as a header.
  if (tool.idempotencyKey)
    schema.properties = {
      ...(schema.properties as JsonSchema),
      [IDEMPOTENCY_ARGUMENT]: jsonSchemaOf(IdempotencyKeyArgument, 'input'),
    }
  return { ...schema, additionalProperties: false }
}

/**
 * The MCP output schema of a tool: the shape of its result (an object: an output that is not one
 * is wrapped), for clients that check or type structured content. Clients hand a model the name,
 * description and input schema of a tool, so what a result means is said in the description, once;
 * which fields are always there, and that no other comes, are the contract's, and the REST tests
 * hold every result to it. The rows of a list (log rows, a recipient's timeline) are typed as
 * objects only, their fields said in the description: typed one by one they took 2.5 KB of the
 * list, which every client reads whole, for every tool, however few it calls.
 */
export function mcpOutputSchema(tool: AnyTool): JsonSchema {
  const schema = compactSchema(rowsAsObjects(shapeOf(jsonSchemaOf(tool.output, 'output'))) as JsonSchema)
  return schema.type === 'object' ? schema : { type: 'object', properties: { [resultKey(tool)]: schema } }
}

/** The schema with the items of each list that holds objects written as `{type: "object"}`. */
function rowsAsObjects(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rowsAsObjects)
  if (!isObject(node)) return node
  const rows = isObject(node.items) && node.items.type === 'object'
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [k, k === 'items' && rows ? { type: 'object' } : rowsAsObjects(v)]),
  )
}

/** A schema without its descriptions, patterns, `required` lists and closed objects. */
function shapeOf(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(shapeOf)
  if (!isObject(node)) return node
  const dropped = (k: string, v: unknown) =>
    ((k === 'description' || k === 'pattern') && typeof v === 'string') ||
    (k === 'required' && Array.isArray(v)) ||
    (k === 'additionalProperties' && v === false)
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k, v]) => !dropped(k, v))
      .map(([k, v]) => [k, shapeOf(v)]),
  )
}

export const resultKey = (tool: AnyTool) => tool.resultKey ?? 'result'

/** A handler's result as MCP structured content (an object). */
export function structuredResult(tool: AnyTool, result: unknown): Record<string, unknown> {
  return isObject(result) ? result : { [resultKey(tool)]: result }
}

/**
 * A tool's JSON Schema as an agent reads it on every `tools/list`: each thing said once. Words that
 * restate another (a pattern beside its format, JavaScript's safe-integer bounds on every integer)
 * are dropped, and a titled shared schema (tools/schemas.ts) used more than once is written once
 * under `$defs` and referenced, within the same schema so that it stays self-contained. The
 * handlers still check every argument with the zod schema itself.
 */
export function compactSchema(schema: JsonSchema): JsonSchema {
  return hoistTitled(tidy(schema) as JsonSchema)
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER
/** Keywords whose value is data, not a schema. */
const VALUES = new Set(['enum', 'const', 'default'])

/** Drops what restates something else in the same node, in every node. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy)
  if (!isObject(node)) return node
  const out: JsonSchema = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, VALUES.has(k) ? v : tidy(v)]))
  // `format: email` names the address syntax (RFC 5321, whose path limit is the 254 characters);
  // the pattern and the length beside it are the server's own check.
  if (out.format === 'email') delete out.pattern, delete out.maxLength
  // An enum of values of one type says that type.
  if (Array.isArray(out.enum) && out.enum.every((v) => jsonType(v) === out.type)) delete out.type
  // `contentEncoding` says base64 in standard words; `format: base64` is no registered format.
  if (out.contentEncoding === 'base64') delete out.pattern, delete out.format
  // zod bounds every integer to JavaScript's safe range, which says nothing about the value.
  if (out.minimum === -MAX_SAFE) delete out.minimum
  if (out.maximum === MAX_SAFE) delete out.maximum
  // JSON object keys are always strings.
  if (JSON.stringify(out.propertyNames) === '{"type":"string"}') delete out.propertyNames
  return nullableAsType(out)
}

/** `anyOf: [{type: T, …}, {type: "null"}]` as `type: [T, "null"]`, when nothing else in it rules out null. */
function nullableAsType(node: JsonSchema): JsonSchema {
  const options = node.anyOf
  if (!Array.isArray(options) || options.length !== 2) return node
  const inner = options.find((o) => !isNullType(o))
  if (!options.some(isNullType) || !isObject(inner) || typeof inner.type !== 'string') return node
  if (['enum', 'const', 'anyOf', 'oneOf', 'allOf', '$ref'].some((k) => k in inner)) return node
  const { anyOf: _drop, ...rest } = node
  return { ...inner, ...rest, type: [inner.type, 'null'] }
}

const jsonType = (v: unknown) => (typeof v === 'number' ? 'number' : typeof v)

const isNullType = (o: unknown) => isObject(o) && Object.keys(o).join() === 'type' && o.type === 'null'

/**
 * Writes each titled subschema that occurs more than once under `$defs`, named by its title, and
 * refers to it where it occurred; the description and default of each use stay at the use. A title
 * left inline is dropped: it names a shared schema for this step, and says nothing to the reader.
 */
function hoistTitled(schema: JsonSchema): JsonSchema {
  const defs: Record<string, JsonSchema> = {}
  let root = schema
  for (let shared = sharedTitle(root, defs); shared; shared = sharedTitle(root, defs)) {
    const replace = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(replace)
      if (!isObject(node)) return node
      if (node.title !== shared) return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, replace(v)]))
      const { title: _t, description, default: fallback, ...body } = node
      defs[shared] ??= body
      if (JSON.stringify(defs[shared]) !== JSON.stringify(body)) throw new Error(`${shared} differs between uses`)
      const use: JsonSchema = { $ref: `#/$defs/${shared}` }
      if (description !== undefined) use.description = description
      if (fallback !== undefined) use.default = fallback
      return use
    }
    root = replace(root) as JsonSchema
    for (const [name, def] of Object.entries(defs)) if (name !== shared) defs[name] = replace(def) as JsonSchema
  }
  const untitled = dropTitles(root) as JsonSchema
  return Object.keys(defs).length ? { ...untitled, $defs: dropTitles(defs) } : untitled
}

/** The first title (in document order) that occurs more than once in the schema and its definitions. */
function sharedTitle(root: JsonSchema, defs: Record<string, JsonSchema>): string | undefined {
  const counts = new Map<string, number>()
  const count = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const n of node) count(n)
      return
    }
    if (!isObject(node)) return
    if (typeof node.title === 'string') counts.set(node.title, (counts.get(node.title) ?? 0) + 1)
    Object.values(node).forEach(count)
  }
  count([root, defs])
  return [...counts].find(([, n]) => n > 1)?.[0]
}

function dropTitles(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(dropTitles)
  if (!isObject(node)) return node
  const kept = Object.entries(node).filter(([k, v]) => k !== 'title' || typeof v !== 'string')
  return Object.fromEntries(kept.map(([k, v]) => [k, dropTitles(v)]))
}

/** A JSON object: a schema node, a tool call's arguments, a result that needs no wrapping. */
export const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v)
