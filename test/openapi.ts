import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { OpenAPIBackend, type Document } from 'openapi-backend'
import { expect } from 'vitest'

/**
 * Response validation against the contract: the hosted service's OpenAPI document 1.5.0 as the
 * project keeps it (`test/fixtures/contract-openapi-1.5.0.json`: its operations, parameters,
 * statuses, schemas and example values, without its prose), which our REST responses must satisfy.
 *
 *   await expectMatchesUpstream('sendMail', res.status, await res.json())
 *
 * A status the document lists for the operation is checked against that response's schema. An
 * error status it does not list (404 on viewMailLog, 413, 415, …) is checked against
 * `components.schemas.ErrorMessage`, the shape of every error in the document. A status with no
 * schema at all fails the check rather than passing silently (openapi-backend would pass it).
 */

export const UPSTREAM_PATH = fileURLToPath(new URL('./fixtures/contract-openapi-1.5.0.json', import.meta.url))

/** The operation that carries `ErrorMessage` for statuses an operation does not list. */
const ERROR_OPERATION = '__ErrorMessage'

type Responses = Record<string, { content?: Record<string, { schema?: unknown }> }>
type Operation = { operationId?: string; responses?: Responses }

/** The upstream document (never mutated). */
export function loadUpstream(): Document {
  return JSON.parse(readFileSync(UPSTREAM_PATH, 'utf8')) as Document
}

/** The tools beyond the contract: those whose name is none of its document's operationIds. */
export function extensionsOf(names: string[]): string[] {
  const paths = Object.values(loadUpstream().paths ?? {}) as Record<string, Operation>[]
  const contract = new Set(paths.flatMap((p) => Object.values(p).map((o) => o.operationId)))
  return names.filter((name) => !contract.has(name))
}

// Formats the document uses that Ajv does not know without ajv-formats (which is not a
// dependency of ours). `date-time` follows the document's own usage: its DenyRuleRecord.created
// and MailLogEntry examples are `2022-03-22 19:16:35`, a space and no zone, not strict RFC 3339.
export const FORMATS: Record<string, RegExp> = {
  email: /^[^\s@<>(),;:"]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/,
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  'date-time':
    /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?$/i,
}

/** Strict RFC 3339 date-time, for reporting where our values differ from the declared format. */
export const RFC3339_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i

let backend: Promise<{ api: OpenAPIBackend; operations: Map<string, Operation> }> | undefined

function load() {
  backend ??= (async () => {
    const upstream = loadUpstream()
    const definition = structuredClone(upstream) as Document & { paths: Record<string, Record<string, Operation>> }
    // One synthetic operation whose every response is an ErrorMessage; the real operations are untouched.
    definition.paths['/__upstream-error-message'] = {
      get: {
        operationId: ERROR_OPERATION,
        responses: {
          default: { content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorMessage' } } } },
        },
      } as Operation,
    }
    const api = new OpenAPIBackend({
      definition,
      strict: false,
      quick: true,
      validate: true,
      customizeAjv: (ajv) => {
        for (const [name, re] of Object.entries(FORMATS)) ajv.addFormat(name, re)
        return ajv
      },
    })
    await api.init()
    const operations = new Map<string, Operation>()
    for (const methods of Object.values(
      (upstream as unknown as { paths: Record<string, Record<string, Operation>> }).paths,
    )) {
      for (const op of Object.values(methods)) if (op?.operationId) operations.set(op.operationId, op)
    }
    return { api, operations }
  })()
  return backend
}

/** The statuses the upstream document lists for an operation (`'200'`, `'4XX'`, `'default'`, …). */
export async function documentedStatuses(operationId: string): Promise<string[]> {
  const op = (await load()).operations.get(operationId)
  if (!op) throw new Error(`the upstream document has no operation ${operationId}`)
  return Object.keys(op.responses ?? {})
}

/** The schema errors of a response body, or [] when it validates. See the module comment. */
export async function upstreamErrors(operationId: string, status: number, body: unknown): Promise<string[]> {
  const { api, operations } = await load()
  const op = operations.get(operationId)
  if (!op) throw new Error(`the upstream document has no operation ${operationId}`)
  const responses = op.responses ?? {}
  const listed = responses[String(status)] ?? responses[`${Math.floor(status / 100)}XX`]
  let target = operationId
  if (!listed?.content) {
    if (status < 400) return [`the upstream document describes no body for ${operationId} ${status}`]
    target = ERROR_OPERATION
  } else if (!listed.content['application/json']?.schema) {
    return [`the upstream document describes no application/json body for ${operationId} ${status}`]
  }
  const result = api.validateResponse(body, target, status)
  return (result.errors ?? []).map(
    (e) => `${e.instancePath || '(body)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`,
  )
}

/** Asserts that a response body validates against the upstream document (see the module comment). */
export async function expectMatchesUpstream(operationId: string, status: number, body: unknown): Promise<void> {
  const errors = await upstreamErrors(operationId, status, body)
  expect(
    errors,
    `${operationId} ${status} ${JSON.stringify(body).slice(0, 500)} does not match the upstream document`,
  ).toEqual([])
}

/** The schema errors of a body checked against `components.schemas.ErrorMessage` alone. */
export async function errorMessageErrors(body: unknown): Promise<string[]> {
  const { api } = await load()
  const result = api.validateResponse(body, ERROR_OPERATION, 500)
  return (result.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message}`)
}

/** Asserts that an error body that belongs to no operation (an unknown path) is an upstream ErrorMessage. */
export async function expectErrorMessage(body: unknown): Promise<void> {
  expect(await errorMessageErrors(body), `${JSON.stringify(body)} is not an upstream ErrorMessage`).toEqual([])
}
