import { z } from 'zod'
import { MailroomError } from '../errors.js'
import { defineTool } from './define.js'
import { orderFields, passwordWithheld, resolveOrder } from './common.js'
import { MailOrderDetail } from './schemas.js'

export const rotateOrderPassword = defineTool({
  name: 'rotateOrderPassword',
  title: "Replace a mail order's SMTP password",
  http: { method: 'POST', path: '/mail/{id}/password' },
  errors: [400, 403, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  description:
    'Gives the mail order `id` a new SMTP password and returns the order with it. The old password stops ' +
    'working at once. Refused (403) where getMailOrderById withholds the password.',
  input: z.object({ id: z.number().int().min(1) }),
  output: MailOrderDetail,
  handler: async ({ id }, ctx) => {
    const order = await resolveOrder(ctx, id, { allowCanceled: true })
    const withheld = passwordWithheld(ctx, order)
    if (withheld) throw new MailroomError(403, `id: mail order ${id}: not rotated: ${withheld}`)
    const password = await ctx.store.orders.rotatePassword(order.id)
    ctx.logger.info({ order: order.id, account: order.accountId }, 'replaced the SMTP password of a mail order')
    return { ...orderFields(order), password }
  },
})
