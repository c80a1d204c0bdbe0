import { z } from 'zod'
import type { AnyTool } from '../tools/define.js'

export type JsonSchema = Record<string, unknown>

/** A zod schema as a self-contained JSON Schema (no $schema, no $defs), for MCP or OpenAPI 3.0. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output', target: 'draft-2020-12' | 'openapi-3.0' = 'draft-2020-12'): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, target, unrepresentable: 'any' }) as JsonSchema
  return rest
}

/** The MCP output schema of a tool: its output, wrapped in an object when it is not one. */
export function mcpOutputSchema(tool: AnyTool): JsonSchema {
  const schema = jsonSchemaOf(tool.output, 'output')
  if (schema.type === 'object') return schema
  const key = resultKey(tool)
  return { type: 'object', properties: { [key]: schema }, required: [key] }
}

export const resultKey = (tool: AnyTool) => tool.resultKey ?? 'result'

/** A handler's result as MCP structured content (an object). */
export function structuredResult(tool: AnyTool, result: unknown): Record<string, unknown> {
  const isObject = typeof result === 'object' && result !== null && !Array.isArray(result)
  return isObject ? (result as Record<string, unknown>) : { [resultKey(tool)]: result }
}
