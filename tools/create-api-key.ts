import { z } from 'zod'
import { MailroomError } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { refuseAccessToken } from './get-api-keys.js'

export const createApiKey = defineTool({
  name: 'createApiKey',
  title: 'Create an API key',
  http: { method: 'POST', path: '/keys', bodyTypes: ['application/json'] },
  errors: [400, 403],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  description:
    'Creates an API key of the account and returns it, shown only now. `sandbox`: a sandbox key, whose sends ' +
    'never leave; a sandbox key may create only those. A key under a send policy may create none.',
  input: z.object({ sandbox: z.boolean().default(false) }),
  output: z.object({ id: z.number().int(), key: z.string(), prefix: z.string(), sandbox: z.boolean() }),
  handler: async ({ sandbox }, ctx) => {
    refuseAccessToken(ctx, 'not created')
    // A new key has no policy: a key under one would step out of it.
    if (ctx.policy)
      throw new MailroomError(
        403,
        'not created: this API key is under a send policy, and a new key would have none; a key without one may create keys',
      )
    if (ctx.sandbox && !sandbox)
      throw new MailroomError(403, 'sandbox: not created: a sandbox key may create sandbox keys only')
    const { info, key } = await ctx.store.apiKeys.create(accountOf(ctx), ctx.clock(), { sandbox })
    ctx.logger.info({ account: info.accountId, key: info.prefix, sandbox }, 'created an API key')
    return { id: info.id, key, prefix: info.prefix, sandbox: info.sandbox }
  },
})
