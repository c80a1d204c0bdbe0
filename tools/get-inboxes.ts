import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { InboxRecord, inboxRecord } from './inbound-schemas.js'

export const getInboxes = defineTool({
  name: 'getInboxes',
  title: 'List inboxes',
  http: { method: 'GET', path: '/inboxes' },
  resultKey: 'inboxes',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's inboxes (addresses whose mail is kept), with their message and unread counts and bytes held.",
  input: z.object({}),
  output: z.array(InboxRecord),
  handler: async (_input, ctx) => (await ctx.store.inbound.inboxes(accountOf(ctx))).map(inboxRecord),
})
