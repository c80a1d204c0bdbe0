import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { MailOrder } from './schemas.js'

export const getMailOrders = defineTool({
  name: 'getMailOrders',
  title: 'List mail orders (sending accounts)',
  http: { method: 'GET', path: '/mail' },
  resultKey: 'orders',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Lists every mail order of the account, active and canceled, by id. A mail order is a sending credential: ' +
    'its numeric id is the optional `id` of sendMail, sendAdvMail, rawMail and viewMailLog (when omitted, the ' +
    'first active order is used), and its username mb<id> is the SMTP login. Returns id, status, username and ' +
    'comment; use getMailOrderById for the SMTP password.',
  input: z.object({}),
  output: z.array(MailOrder),
  handler: async (_input, ctx) =>
    (await ctx.store.orders.list(accountOf(ctx))).map((o) => ({
      id: o.id,
      status: o.status,
      username: `mb${o.id}`,
      ...(o.comment ? { comment: o.comment } : {}),
    })),
})
