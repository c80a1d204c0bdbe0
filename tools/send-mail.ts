import { z } from 'zod'
import { toMailboxes } from '../relay/addresses.js'
import { defineTool, JSON_AND_FORM } from './define.js'
import { resolveOrder, SENDS_AND_RETURNS, sendComposed, singleAddress } from './common.js'
import { sendAnswer } from './held.js'
import { emailOf, HeaderText, ListFlag, OrderId, SendResponse } from './schemas.js'

const ADV = 'sendAdvMail (POST /mail/advsend)'
/**
 * A bare address. A display name (RFC 5322 name-addr) or an address list is refused with the way
 * to send it: sendAdvMail takes both, and an agent that wrote one meant to send, not to be told no.
 */
const bareEmail = (takes: string, advice: string) =>
  emailOf((input) =>
    /[<>,;]/.test(input) ? `"${input}" is not a bare address: sendMail takes ${takes}; ${advice} ${ADV}` : undefined,
  )
const Recipient = bareEmail('bare addresses, several as an array', 'for display names or comma-separated lists use')

export const sendMail = defineTool({
  name: 'sendMail',
  title: 'Send a simple email',
  http: { method: 'POST', path: '/mail/send', bodyTypes: JSON_AND_FORM, message: true },
  errors: [400, 403, 404, 409, 422, 429],
  idempotencyKey: true,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description:
    'Sends an email from one bare address to one or more bare addresses; `from` is also the Reply-To. For ' +
    'names, Cc, Bcc, a Reply-To or attachments use sendAdvMail; for a message you built, rawMail. ' +
    `${SENDS_AND_RETURNS}`,
  input: z.object({
    to: z.union([Recipient, z.array(Recipient).min(1)]).describe('Recipient address, or an array of addresses.'),
    from: bareEmail('one bare address', 'for a display name use').describe(
      'Sender address, authorized for the mail order.',
    ),
    subject: HeaderText,
    body: z.string().describe('Message body; HTML when it contains an HTML tag, else plain text.'),
    id: OrderId.optional(),
    list: ListFlag,
  }),
  output: SendResponse,
  handler: async (input, ctx) => {
    // Every address is checked before the order is looked up: a bad body is a 400 first.
    const from = singleAddress('from', input.from)
    const to = toMailboxes('to', input.to)
    const order = await resolveOrder(ctx, input.id)
    const sent = await sendComposed(
      ctx,
      order,
      {
        from,
        to,
        replyTo: [from],
        subject: input.subject,
        body: input.body,
      },
      { list: input.list },
    )
    return sendAnswer(ctx, sent, input.body)
  },
})
