import { simpleParser } from 'mailparser'
import { z } from 'zod'
import { badInput, notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { InboundId } from './inbound-schemas.js'

/** The largest attachment handed out: its base64 over MCP is a third larger still, in one response. */
export const ATTACHMENT_LIMIT = 10 * 1024 * 1024

export const getAttachment = defineTool({
  name: 'getAttachment',
  title: 'Download an attachment',
  http: { method: 'GET', path: '/inbound/{id}/attachments/{index}', download: true },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Returns an attachment of a received message (its index in getInboundMessage), base64 in `content`; ' +
    'REST answers the bytes. At most 10 MB.',
  input: z.object({ id: InboundId, index: z.number().int().min(0).max(10_000) }),
  output: z.object({
    filename: z.string().nullable(),
    contentType: z.string(),
    size: z.number().int(),
    content: z.string().describe('Base64.'),
  }),
  handler: async ({ id, index }, ctx) => {
    const raw = await ctx.store.inbound.raw(id, accountOf(ctx))
    if (!raw) throw notFound(`id: received message ${id} not found`)
    // The stored message is parsed again: attachments are not kept apart from it.
    const { attachments } = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true })
    const attachment = attachments[index]
    if (!attachment) throw notFound(`index: message ${id} has ${attachments.length} attachments (from 0)`)
    if (attachment.size > ATTACHMENT_LIMIT)
      throw badInput(
        `index: attachment ${index} is ${attachment.size} bytes, more than the ${ATTACHMENT_LIMIT} bytes handed out`,
      )
    return {
      filename: attachment.filename ?? null,
      contentType: attachment.contentType,
      size: attachment.size,
      content: attachment.content.toString('base64'),
    }
  },
})
