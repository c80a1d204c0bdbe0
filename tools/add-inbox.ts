import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { InboxRecord, inboxRecord } from './inbound-schemas.js'
import { Email } from './schemas.js'

export const addInbox = defineTool({
  name: 'addInbox',
  title: 'Create an inbox',
  http: { method: 'POST', path: '/inboxes', bodyTypes: ['application/json'] },
  errors: [400],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  description:
    'Creates an inbox: an address at a receiving domain of the account (setDomainReceiving) whose mail is kept ' +
    'for listInboundMessages. Cheap: one per task is fine.',
  input: z.object({ address: Email.describe('The address, e.g. support@acme.example.') }),
  output: InboxRecord,
  handler: async ({ address }, ctx) => {
    const account = accountOf(ctx)
    const inbox = await ctx.store.inbound.addInbox({ accountId: account, address, now: ctx.clock() })
    ctx.logger.info({ account, inbox: inbox.id }, 'created an inbox')
    return inboxRecord(inbox)
  },
})
