import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { orderFields } from './common.js'
import { MailOrder } from './schemas.js'

export const getMailOrders = defineTool({
  name: 'getMailOrders',
  title: 'List mail orders (sending accounts)',
  http: { method: 'GET', path: '/mail' },
  resultKey: 'orders',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's mail orders (sending credentials), active and canceled: `id` (the `id` argument of " +
    'the sends and viewMailLog), `status` (only active ones send), `username` (mb<id>, the SMTP login), ' +
    '`comment`, `sandbox`. getMailOrderById adds the SMTP password.',
  input: z.object({}),
  output: z.array(MailOrder),
  handler: async (_input, ctx) => (await ctx.store.orders.list(accountOf(ctx))).map(orderFields),
})
