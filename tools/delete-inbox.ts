import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { GenericResponse } from './schemas.js'

export const deleteInbox = defineTool({
  name: 'deleteInbox',
  title: 'Delete an inbox',
  http: { method: 'DELETE', path: '/inboxes/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description: 'Deletes an inbox of the account and the messages it holds; its address then refuses mail.',
  input: z.object({ id: z.number().int().min(1).describe('Inbox id (getInboxes).') }),
  output: GenericResponse,
  handler: async ({ id }, ctx) => {
    const account = accountOf(ctx)
    if (!(await ctx.store.inbound.deleteInbox(id, account))) throw notFound(`id: inbox ${id} not found`)
    ctx.logger.info({ account, inbox: id }, 'deleted an inbox')
    return { status: 'ok', text: `inbox ${id} deleted` }
  },
})
