import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { InboundSummaryRecord, summaryRecord } from './inbound-schemas.js'

export const getThread = defineTool({
  name: 'getThread',
  title: 'Read a conversation',
  http: { method: 'GET', path: '/threads/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description: 'Returns a thread (threadId of a received message): the messages received and sent in it, oldest first.',
  input: z.object({ id: z.string().min(1).max(64).describe('The thread id.') }),
  output: z.object({
    id: z.string(),
    messages: z.array(
      z.discriminatedUnion('direction', [
        z.object({ direction: z.literal('received'), time: z.string(), message: InboundSummaryRecord }),
        z.object({
          direction: z.literal('sent'),
          time: z.string(),
          message: z.object({
            mailid: z.string().describe('Its transaction id (getMessage).'),
            from: z.string(),
            to: z.array(z.string()),
            subject: z.string().nullable(),
            messageId: z.string().nullable(),
          }),
        }),
      ]),
    ),
  }),
  handler: async ({ id }, ctx) => {
    const entries = await ctx.store.inbound.thread(id, accountOf(ctx))
    if (!entries) throw notFound(`id: thread ${id} not found`)
    return {
      id,
      messages: entries.map((e) => {
        const time = new Date(e.time).toISOString()
        if (e.direction === 'received') return { direction: e.direction, time, message: summaryRecord(e.message) }
        const { txid, ...sent } = e.message
        return { direction: e.direction, time, message: { mailid: txid, ...sent } }
      }),
    }
  },
})
