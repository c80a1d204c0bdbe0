import { z } from 'zod'
import { notFound } from '../errors.js'
import { messageContent } from '../relay/message-content.js'
import { accountOf, defineTool } from './define.js'
import { getMessage } from './get-message.js'

export const getMessageContent = defineTool({
  name: 'getMessageContent',
  title: "One message's content",
  http: { method: 'GET', path: '/mail/log/{id}/content' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Returns what a message of the account (transaction `id`) says: its `text`, its `html` (unsanitized) and ' +
    'its `raw` source. Only while a recipient still waits: a body is dropped once all are delivered or failed (404).',
  input: getMessage.input,
  output: z.object({ id: z.string(), text: z.string().nullable(), html: z.string().nullable(), raw: z.string() }),
  handler: async ({ id }, ctx) => {
    const txid = id.toLowerCase()
    const message = await ctx.store.mail.message(txid, accountOf(ctx))
    if (!message) throw notFound(`id: message ${id} not found`)
    const raw = await ctx.store.queue.body(message.rowId)
    if (!raw)
      throw notFound(
        `id: the content of message ${id} is no longer kept: a body is dropped once every recipient is delivered or failed`,
      )
    return { id: txid, ...messageContent(raw), raw: raw.toString('utf8') }
  },
})
