import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { InboundAddress, InboundId, InboundSummaryRecord, summaryRecord } from './inbound-schemas.js'

const Result = z.object({ result: z.string() })

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
    auth: z.object({
      spf: Result.extend({ domain: z.string().nullable() }),
      dkim: z.array(Result.extend({ domain: z.string().nullable(), selector: z.string().nullable() })),
      dmarc: Result.extend({ policy: z.string().nullable(), domain: z.string().nullable() }),
      arc: Result,
      local: z.string().optional().describe('Mail from an account of this mailroom, delivered inside it: who sent it.'),
    }),
  }),
  handler: async ({ id }, ctx) => {
    const m = await ctx.store.inbound.get(id, accountOf(ctx))
    if (!m) throw notFound(`id: received message ${id} not found`)
    const { header: _, ...auth } = m.auth
    return {
      ...summaryRecord(m),
      mailFrom: m.mailFrom,
      replyTo: m.replyTo,
      inReplyTo: m.inReplyTo,
      references: m.references,
      text: m.text,
      html: m.html,
      attachments: m.attachments,
      auth,
    }
  },
})
