import { z } from 'zod'
import { MailroomError } from '../errors.js'
import { senderPatternOf } from '../relay/addresses.js'
import { orderFields, passwordWithheld } from './common.js'
import { accountOf, defineTool } from './define.js'
import { MailOrderDetail } from './schemas.js'

const Sender = z
  .string()
  .max(254)
  .transform((value, issue) => {
    const pattern = senderPatternOf(value)
    if (pattern === undefined) issue.addIssue({ code: 'custom', message: `"${value}" is not an address or @domain` })
    return pattern ?? value
  })

export const createMailOrder = defineTool({
  name: 'createMailOrder',
  title: 'Create a mail order',
  http: { method: 'POST', path: '/orders', bodyTypes: ['application/json'] },
  errors: [400, 403],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  description:
    'Creates an active mail order (SMTP credentials) and returns it with its password. `senders`: the ' +
    'addresses or @domains it may send from (none: any). Refused where getMailOrderById withholds passwords.',
  input: z.object({
    comment: z.string().trim().max(200).optional(),
    senders: z.array(Sender).max(100).default([]),
    sandbox: z.boolean().default(false).describe('A sandbox order: its mail never leaves.'),
    list: z
      .boolean()
      .default(false)
      .describe(
        'A bulk order: everything it sends, over SMTP too, gets a one-click unsubscribe link, one recipient per message.',
      ),
  }),
  output: MailOrderDetail,
  handler: async ({ comment, senders, sandbox, list }, ctx) => {
    const withheld = passwordWithheld(ctx, { sandbox })
    if (withheld) throw new MailroomError(403, `not created: ${withheld}`)
    const { order, password } = await ctx.store.orders.create({
      accountId: accountOf(ctx),
      comment: comment || null,
      senders: [...new Set(senders)],
      now: ctx.clock(),
      sandbox,
      list,
    })
    ctx.logger.info({ order: order.id, account: order.accountId, sandbox, list }, 'created a mail order')
    return { ...orderFields(order), password }
  },
})
