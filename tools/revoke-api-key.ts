import { z } from 'zod'
import { MailroomError, notFound } from '../errors.js'
import { ok } from './common.js'
import { accountOf, defineTool } from './define.js'
import { refuseAccessToken } from './get-api-keys.js'
import { GenericResponse } from './schemas.js'

export const revokeApiKey = defineTool({
  name: 'revokeApiKey',
  title: 'Revoke an API key',
  http: { method: 'DELETE', path: '/keys/{id}' },
  errors: [400, 403, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description:
    '[DESTRUCTIVE] Revokes an API key of the account (`id` from getApiKeys), the calling one too: it is ' +
    'refused from then on. A sandbox key may revoke sandbox keys only.',
  input: z.object({ id: z.number().int().min(1) }),
  output: GenericResponse,
  handler: async ({ id }, ctx) => {
    refuseAccessToken(ctx, 'not revoked')
    const key = (await ctx.store.apiKeys.list(accountOf(ctx))).find((k) => k.id === id)
    if (!key) throw notFound(`id: API key ${id} not found`)
    if (ctx.sandbox && !key.sandbox)
      throw new MailroomError(403, `id: API key ${id} not revoked: a sandbox key may revoke sandbox keys only`)
    if (key.revokedAt !== null) return ok('already revoked')
    await ctx.store.apiKeys.revoke(id, ctx.clock())
    ctx.logger.info({ account: key.accountId, key: key.prefix }, 'revoked an API key')
    return ok('record deleted')
  },
})
