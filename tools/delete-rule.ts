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
    '[DESTRUCTIVE] Permanently deletes one deny rule of an active mail order of this account; mail it ' +
    'blocked is accepted again. `ruleId` is the `id` from getRules or the `text` returned by addRule. ' +
    'Returns "record deleted"; 404 when no such rule belongs to the account.',
  input: z.object({ ruleId: z.number().int().min(1).describe('Rule id, from getRules or addRule.') }),
  output: GenericResponse,
  handler: async ({ ruleId }, ctx) => {
    const deleted = await ctx.store.rules.delete(ruleId, (await activeOrders(ctx)).map((o) => o.id))
    if (!deleted) throw notFound(`ruleId: rule ${ruleId} not found`)
    return ok('record deleted')
  },
})
