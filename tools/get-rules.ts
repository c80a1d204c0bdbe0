import { z } from 'zod'
import { defineTool } from './define.js'
import { activeOrders, utcDateTime } from './common.js'
import { DenyRuleRecord } from './schemas.js'

export const getRules = defineTool({
  name: 'getRules',
  title: 'List deny rules',
  http: { method: 'GET', path: '/mail/rules' },
  resultKey: 'rules',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the deny rules of the account's active mail orders: `id` (deleteRule's `ruleId`), `user` (the " +
    'order), `type`, `data`, `created`. A rule refuses the mail it matches before it is queued; addRule ' +
    'says how each type matches.',
  input: z.object({}),
  output: z.array(DenyRuleRecord),
  handler: async (_input, ctx) => {
    const rules = await ctx.store.rules.list((await activeOrders(ctx)).map((o) => o.id))
    return rules.map((r) => ({
      id: String(r.id),
      user: `mb${r.orderId}`,
      type: r.type,
      data: r.data,
      created: utcDateTime(r.createdAt),
    }))
  },
})
