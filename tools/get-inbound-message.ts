import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { InboundAddress, InboundId, InboundSummaryRecord, summaryRecord } from './inbound-schemas.js'

export const getInboundMessage = defineTool({
  name: 'getInboundMessage',
  title: 'Read a received message',
  http: { method: 'GET', path: '/inbound/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Returns a received message: its summary, text, html (unsanitized), extractedText (the new part of a reply), ' +
    'attachments and authentication results (SPF, DKIM, DMARC, ARC). Does not mark it read.',
  input: z.object({ id: InboundId }),
  output: InboundSummaryRecord.extend({
    mailFrom: z.string().describe("The envelope sender; '' for a bounce."),
    replyTo: z.array(InboundAddress),
    inReplyTo: z.string().nullable(),
    references: z.array(z.string()),
    text: z.string().nullable(),
    html: z.string().nullable(),
    attachments: z.array(
      z.object({
        index: z.number().int(),
        filename: z.string().nullable(),
        contentType: z.string(),
        size: z.number().int(),
      }),
    ),
  }),
  handler: async ({ id }, ctx) => {
    const m = await ctx.store.inbound.get(id, accountOf(ctx))
    if (!m) throw notFound(`id: received message ${id} not found`)
    return {
      ...summaryRecord(m),
      mailFrom: m.mailFrom,
      replyTo: m.replyTo,
      inReplyTo: m.inReplyTo,
      references: m.references,
      text: m.text,
      html: m.html,
      attachments: m.attachments,
    }
  },
})
