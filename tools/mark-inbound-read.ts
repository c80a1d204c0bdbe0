import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { InboundId } from './inbound-schemas.js'

export const markInboundRead = defineTool({
  name: 'markInboundRead',
  title: 'Mark received messages read',
  http: { method: 'POST', path: '/inbound/read', bodyTypes: ['application/json'] },
  errors: [400],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description: 'Marks received messages read, or unread with `read` false; returns how many changed.',
  input: z.object({
    ids: z.array(InboundId).min(1).max(1000),
    read: z.boolean().default(true),
  }),
  output: z.object({ changed: z.number().int() }),
  handler: async ({ ids, read }, ctx) => ({ changed: await ctx.store.inbound.markRead(ids, accountOf(ctx), read) }),
})
