import { z } from 'zod'
import { badInput } from '../errors.js'
import { isEmail, notAnEmail } from '../relay/addresses.js'
import { messageContent } from '../relay/message-content.js'
import { missingHeaders, readHeaders } from '../relay/message.js'
import { defineTool } from './define.js'
import { boundPolicy, resolveOrder, SENDS_AND_RETURNS } from './common.js'
import { sendAnswer } from './held.js'
import { ListFlag, OrderId, SendResponse } from './schemas.js'

export const rawMail = defineTool({
  name: 'rawMail',
  title: 'Send a pre-built RFC 822 message unchanged',
  http: {
    method: 'POST',
    path: '/mail/rawsend',
    bodyTypes: ['application/json', 'multipart/form-data'],
    message: true,
  },
  errors: [400, 403, 404, 409, 422, 429],
  idempotencyKey: true,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description:
    'Sends an RFC 822 message you built, byte for byte (a DKIM-Signature stays valid): the sender is its ' +
    'From, the recipients its To, Cc and Bcc (a Bcc header is delivered as written); only a missing Date or ' +
    `Message-ID is added. ${SENDS_AND_RETURNS}`,
  input: z.object({
    raw_email: z.string().min(1).describe('The whole RFC 822 message: headers, a blank line, the body.'),
    id: OrderId.optional(),
    list: ListFlag,
  }),
  output: SendResponse,
  handler: async (input, ctx) => {
    const raw = Buffer.from(input.raw_email, 'utf8')
    const headers = readHeaders(raw)
    if (headers.fromFields.length === 0) throw badInput('raw_email: the message has no From header')
    if (headers.fromFields.length > 1)
      throw badInput(`raw_email: the message has ${headers.fromFields.length} From headers; RFC 5322 allows one`)
    if (!headers.from) throw badInput(`raw_email: the From header "${headers.fromFields[0]}" holds no email address`)
    const badAuthor = headers.authors.find((a) => !isEmail(a))
    if (badAuthor) throw badInput(`raw_email: From "${badAuthor}" ${notAnEmail(badAuthor)}`)
    if (headers.recipients.length === 0) throw badInput('raw_email: no recipients in the To, Cc or Bcc headers')
    const bad = headers.recipients.find((r) => !isEmail(r))
    if (bad) throw badInput(`raw_email: recipient "${bad}" ${notAnEmail(bad)}`)
    const order = await resolveOrder(ctx, input.id)
    // The bytes go as submitted, after the Date and Message-ID they lack, if any.
    const txid = ctx.relay.newTxid()
    const added = missingHeaders(headers, txid, new Date(ctx.clock()))
    const submitted = await ctx.relay.submit({
      txid,
      order,
      envFrom: headers.from,
      recipients: headers.recipients,
      headerFrom: headers.from,
      authors: headers.authors,
      replyTo: headers.replyTo,
      subject: headers.subject,
      messageId: added.messageId,
      inReplyTo: headers.inReplyTo,
      raw: [raw],
      added: added.lines,
      origin: ctx.origin,
      transtype: 'HTTP',
      interface: 'api',
      sandbox: ctx.sandbox,
      policy: boundPolicy(ctx),
      list: input.list,
    })
    // The person asked about a held message sees the start of its text.
    return sendAnswer(ctx, submitted, submitted.hold && ctx.ask ? messageContent(raw).text : null)
  },
})
