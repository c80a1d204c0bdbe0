import { z } from 'zod'
import { defineTool } from './define.js'
import { orderFields, passwordWithheld, resolveOrder } from './common.js'
import { MailOrderDetail, WITHHELD_PASSWORD } from './schemas.js'

export const getMailOrderById = defineTool({
  name: 'getMailOrderById',
  title: 'Get one mail order with its SMTP password',
  http: { method: 'GET', path: '/mail/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Returns mail order `id` with its SMTP `password` (or `passwordWithheld`), for a mail program that logs ' +
    "in to SMTP submission as `username`. 404 if it is not the account's order.",
  input: z.object({ id: z.number().int().min(1) }),
  output: MailOrderDetail,
  handler: async ({ id }, ctx) => {
    const order = await resolveOrder(ctx, id, { allowCanceled: true })
    const withheld = passwordWithheld(ctx, order)
    if (withheld) return { ...orderFields(order), password: WITHHELD_PASSWORD, passwordWithheld: withheld }
    return { ...orderFields(order), password: await ctx.store.orders.password(order.id) }
  },
})
