import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool, JSON_AND_FORM } from './define.js'
import { ok } from './common.js'
import { Email, GenericResponse } from './schemas.js'

export const delistBlock = defineTool({
  name: 'delistBlock',
  title: 'Delist an address from the block lists',
  http: { method: 'POST', path: '/mail/blocks/delete', bodyTypes: JSON_AND_FORM },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  description:
    '[DESTRUCTIVE] Removes an address from every block list of the account, as sender and as recipient. Use ' +
    'it when getMailBlocks shows one that should send or receive again; the filter blocks it again if it ' +
    'offends again. Returns `text` "record deleted"; 404 if it was on no list.',
  input: z.object({ email: Email.describe('The address to delist, e.g. a `from` of getMailBlocks.') }),
  output: GenericResponse,
  handler: async ({ email }, ctx) => {
    const removed = await ctx.store.blocks.delist(accountOf(ctx), email)
    if (removed === 0) throw notFound(`email: ${email} is not on any block list of this account`)
    ctx.logger.info({ account: ctx.accountId, removed }, 'address delisted')
    return ok('record deleted')
  },
})
