import { z } from 'zod'
import { badInput } from '../errors.js'
import { toMailboxes } from '../relay/addresses.js'
import { defineTool, JSON_AND_FORM } from './define.js'
import { resolveOrder, SENDS_AND_RETURNS, sendComposed, singleAddress } from './common.js'
import { sendAnswer } from './held.js'
import {
  EmailAddressesTypes,
  EmailAddressTypes,
  HeaderText,
  ListFlag,
  MailAttachment,
  OrderId,
  SendResponse,
} from './schemas.js'

export const sendAdvMail = defineTool({
  name: 'sendAdvMail',
  title: 'Send an email with Cc, Bcc, names and attachments',
  http: { method: 'POST', path: '/mail/advsend', bodyTypes: JSON_AND_FORM, message: true },
  errors: [400, 403, 404, 409, 422, 429],
  idempotencyKey: true,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description: `Sends an email with display names, Cc, Bcc, a Reply-To or attachments. ${SENDS_AND_RETURNS}`,
  input: z.object({
    from: EmailAddressTypes.describe('Sender, authorized for the mail order.'),
    to: EmailAddressesTypes,
    subject: HeaderText,
    body: z.string().describe('Message body; HTML when it contains an HTML tag, else plain text.'),
    replyto: EmailAddressesTypes.optional(),
    cc: EmailAddressesTypes.optional().describe('Recipients shown in Cc.'),
    bcc: EmailAddressesTypes.optional().describe('Recipients shown in no header.'),
    attachments: z.array(MailAttachment).optional(),
    id: OrderId.optional(),
    list: ListFlag,
  }),
  output: SendResponse,
  handler: async (input, ctx) => {
    // Every address is checked before the order is looked up: a bad body is a 400 first.
    const mail = {
      from: singleAddress('from', input.from),
      to: toMailboxes('to', input.to),
      cc: input.cc === undefined ? [] : toMailboxes('cc', input.cc),
      bcc: input.bcc === undefined ? [] : toMailboxes('bcc', input.bcc),
      replyTo: input.replyto === undefined ? [] : toMailboxes('replyto', input.replyto),
      subject: input.subject,
      body: input.body,
      attachments: input.attachments,
    }
    if (mail.to.length + mail.cc.length + mail.bcc.length === 0) throw badInput('to: no recipient address given')
    const order = await resolveOrder(ctx, input.id)
    return sendAnswer(ctx, await sendComposed(ctx, order, mail, { list: input.list }), mail.body)
  },
})
