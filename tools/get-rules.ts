import { z } from 'zod'
import { sqlDateTime } from '../storage/sqlite-mail.js'
import { defineTool } from './define.js'
import { activeOrders } from './common.js'
import { DenyRuleRecord } from './schemas.js'

export const getRules = defineTool({
  name: 'getRules',
  title: 'List deny rules',
  http: { method: 'GET', path: '/mail/rules' },
  resultKey: 'rules',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Lists the deny rules of every active mail order of the account. A rule rejects a message before it is ' +
    'queued: `email` (exact envelope sender), `domain` (any sender at the domain), `startswith` (sender local ' +
    'part prefix) or `destination` (exact recipient). Each rule\'s `id` is the `ruleId` of deleteRule; create ' +
    'rules with addRule.',
  input: z.object({}),
  output: z.array(DenyRuleRecord),
  handler: async (_input, ctx) => {
    const rules = await ctx.store.rules.list((await activeOrders(ctx)).map((o) => o.id))
    return rules.map((r) => ({ id: String(r.id), user: `mb${r.orderId}`, type: r.type, data: r.data, created: sqlDateTime(r.createdAt) }))
  },
})
