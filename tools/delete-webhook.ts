import { z } from 'zod'
import { notFound } from '../errors.js'
import { ok } from './common.js'
import { accountOf, defineTool } from './define.js'
import { GenericResponse } from './schemas.js'

export const deleteWebhook = defineTool({
  name: 'deleteWebhook',
  title: 'Delete a webhook',
  http: { method: 'DELETE', path: '/webhooks/{id}' },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description:
    '[DESTRUCTIVE] Deletes a webhook of the account (`id` from getWebhooks) and the events still waiting ' +
    'for it. Returns `text` "record deleted".',
  input: z.object({ id: z.number().int().min(1) }),
  output: GenericResponse,
  handler: async ({ id }, ctx) => {
    if (!(await ctx.store.webhooks.delete(id, accountOf(ctx)))) throw notFound(`id: webhook ${id} not found`)
    return ok('record deleted')
  },
})
