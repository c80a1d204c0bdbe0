import type { z } from 'zod'
import { badInput } from '../errors.js'
import type { AnyTool } from '../tools/define.js'

/** Validates with the tool's schema; the 400's message names each bad field. */
export function parseInput(tool: AnyTool, raw: unknown): unknown {
  // reportInput: so that a field given with the wrong type is not reported as missing.
  const parsed = tool.input.safeParse(raw, { reportInput: true })
  if (parsed.success) return parsed.data
  throw badInput(formatIssues(parsed.error))
}

function formatIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.join('.') || 'body'
      const message =
        (i.code === 'invalid_type' || i.code === 'invalid_union') && i.input === undefined ? 'is required' : i.message
      return `${path}: ${message}`
    })
    .join('; ')
}
