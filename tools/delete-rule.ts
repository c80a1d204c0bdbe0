import { z } from 'zod'
import { notFound } from '../errors.js'
import { defineTool } from './define.js'
import { activeOrders, ok } from './common.js'
import { GenericResponse } from './schemas.js'

export const deleteRule = defineTool({
  name: 'deleteRule',
  title: 'Delete a deny rule',
  http: { method: 'DELETE', path: '/mail/rules/{ruleId}' },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description:
    "[DESTRUCTIVE] Deletes a deny rule of the account's active mail orders; mail it refused is accepted " +
    'again. `ruleId`: an `id` of getRules, or the `text` addRule returned. Returns `text` "record deleted"; ' +
    '404 if there is no such rule.',
  input: z.object({ ruleId: z.number().int().min(1) }),
  output: GenericResponse,
  handler: async ({ ruleId }, ctx) => {
    const deleted = await ctx.store.rules.delete(
      ruleId,
      (await activeOrders(ctx)).map((o) => o.id),
    )
    if (!deleted) throw notFound(`ruleId: rule ${ruleId} not found`)
    return ok('record deleted')
  },
})
