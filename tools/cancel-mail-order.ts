import { z } from 'zod'
import { MailroomError } from '../errors.js'
import { orderFields, resolveOrder } from './common.js'
import { defineTool } from './define.js'
import { MailOrder } from './schemas.js'

export const cancelMailOrder = defineTool({
  name: 'cancelMailOrder',
  title: 'Cancel a mail order',
  http: { method: 'POST', path: '/orders/{id}/cancel' },
  errors: [400, 403, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description:
    '[DESTRUCTIVE] Cancels the mail order `id` for good: it sends no more, over any door; its log stays. ' +
    'A sandbox key may cancel sandbox orders only.',
  input: z.object({ id: z.number().int().min(1).describe('The mail order to cancel.') }),
  output: MailOrder,
  handler: async ({ id }, ctx) => {
    const order = await resolveOrder(ctx, id, { allowCanceled: true })
    if (ctx.sandbox && !order.sandbox)
      throw new MailroomError(403, `id: mail order ${id} not canceled: a sandbox key may cancel sandbox orders only`)
    if (order.status !== 'canceled') {
      await ctx.store.orders.setStatus(order.id, 'canceled')
      ctx.logger.info({ order: order.id, account: order.accountId }, 'canceled a mail order')
    }
    return orderFields({ ...order, status: 'canceled' })
  },
})
