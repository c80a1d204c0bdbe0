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
    "Lists the account's mail orders (sending credentials), active and canceled: `id`, `status` (only active " +
    "orders send), `username` (mb<id>, the SMTP login), `comment` and `sandbox`. An order's id is the `id` argument of " +
    'sendMail, sendAdvMail, rawMail and viewMailLog (default: the first active order). getMailOrderById adds ' +
    'the SMTP password.',
  input: z.object({}),
  output: z.array(MailOrder),
  handler: async (_input, ctx) => (await ctx.store.orders.list(accountOf(ctx))).map(orderFields),
})
