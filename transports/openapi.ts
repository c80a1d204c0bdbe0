import type { Config } from '../config.js'
import { PACKAGE } from '../package-info.js'
import type { AnyTool } from '../tools/define.js'
import { TOOLS } from '../tools/index.js'
import { jsonSchemaOf, type JsonSchema } from './json-schema.js'

/** The contract's interface version, which our REST surface implements. */
export const API_VERSION = '1.5.0'

const ERROR_RESPONSES: Record<number, string> = {
  400: 'Invalid input: the message names the field and what is wrong.',
  401: 'The API key (X-API-KEY, or a bearer token) is missing or invalid.',
  403: "Not allowed to this caller (a sandbox key, an access token without the scope it needs, a recipient outside the send policy's allowedRecipients, a key under a send policy deciding a held message), or a held send its person declined.",
  404: 'No such record, or it belongs to another account.',
  429: "A send policy's maxPerHour or maxPerDay is reached (or too many wrong API keys from this address): nothing was sent; try again after Retry-After seconds.",
  409: 'A request with the same Idempotency-Key is still being processed (retry after Retry-After seconds), or the held message was decided already.',
  422: 'The Idempotency-Key was used within 24 hours for a different request.',
  413: 'The request body (or the message) is too large.',
  415: 'Unsupported request content type.',
  500: 'Internal error; the detail is in the server log.',
  503: 'Try again after Retry-After seconds: the server holds as many message bytes in memory as it may (MAILROOM_MEMORY_BUDGET), or its disk is full. Nothing was accepted.',
}

/** The IETF Idempotency-Key header of the sends (tools/idempotency.ts). */
const IDEMPOTENCY_HEADER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: a request with the key of an earlier one of the last 24 hours sends nothing and answers ' +
    'what that one answered (the same transaction id); the key with a different request is a 422, while the ' +
    'first is being processed a 409. A refused request (4xx) does not keep its key. 1 to 255 printable ASCII characters.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
}

const pathParams = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1])

/** One OpenAPI operation of a tool: parameters from its path and query fields, its body, its responses. */
function operationOf(tool: AnyTool): JsonSchema {
  const inPath = pathParams(tool.http.path)
  const hasBody = tool.http.method === 'POST'
  const shape = tool.input.shape as Record<string, import('zod').ZodType>
  const parameters = Object.entries(shape)
    .filter(([name]) => inPath.includes(name) || !hasBody)
    .map(([name, field]) => {
      const schema = jsonSchemaOf(field, 'input', 'openapi-3.0')
      const { description, ...rest } = schema
      return {
        name,
        in: inPath.includes(name) ? 'path' : 'query',
        required: inPath.includes(name) || !field.safeParse(undefined).success,
        description,
        schema: rest,
      }
    })
  if (tool.idempotencyKey) parameters.push(IDEMPOTENCY_HEADER)
  const op: JsonSchema = {
    operationId: tool.name,
    summary: tool.title,
    description: tool.description,
    ...(tool.public ? { security: [] } : {}),
    ...(parameters.length ? { parameters } : {}),
  }
  if (hasBody) {
    const body = jsonSchemaOf(tool.input.omit(Object.fromEntries(inPath.map((p) => [p, true]))), 'input', 'openapi-3.0')
    op.requestBody = {
      required: true,
      content: Object.fromEntries(
        (tool.http.bodyTypes ?? ['application/json']).map((type) => [type, { schema: body }]),
      ),
    }
  }
  const output = jsonSchemaOf(tool.output, 'output', 'openapi-3.0')
  const ok = tool.http.download
    ? { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } }
    : output.type === 'string'
      ? { 'text/plain': { schema: output }, 'application/json': { schema: output } }
      : { 'application/json': { schema: output } }
  const statuses = [
    ...(tool.public ? [] : [401]),
    ...tool.errors,
    ...(hasBody ? [413, 415] : []),
    ...(tool.http.message ? [503] : []),
  ].sort()
  op.responses = {
    '200': { description: 'OK', content: ok },
    ...Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }])),
    default: { $ref: '#/components/responses/E500' },
  }
  return op
}

/** The OpenAPI 3.0.3 document of the REST surface, generated from the tool registry. */
export function openApiDocument(config: Pick<Config, 'publicUrl'>, tools: readonly AnyTool[] = TOOLS): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {}
  for (const tool of tools) (paths[tool.http.path] ??= {})[tool.http.method.toLowerCase()] = operationOf(tool)
  const errorMessage = {
    type: 'object',
    required: ['code', 'message'],
    properties: {
      code: { type: 'integer', format: 'int32', description: 'Equals the HTTP status.' },
      message: { type: 'string' },
    },
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'mailroom',
      version: API_VERSION,
      description:
        `${PACKAGE.description}. Every operation is also an MCP tool of the same name at ${config.publicUrl}/mcp. ` +
        `Server ${PACKAGE.product} ${PACKAGE.version}.`,
    },
    servers: [{ url: config.publicUrl }],
    security: [{ apiKeyAuth: [] }, { bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        apiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'The API key of the account.' },
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The API key of the account (`mr_…`) as a bearer token, the same key as in X-API-KEY; or an OAuth ' +
            'access token (`mra_…`), which may call the operations of its scopes only.',
        },
      },
      schemas: { ErrorMessage: errorMessage },
      responses: Object.fromEntries(
        Object.entries(ERROR_RESPONSES).map(([code, description]) => [
          `E${code}`,
          { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorMessage' } } } },
        ]),
      ),
    },
  }
}
