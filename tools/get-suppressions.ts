import { z } from 'zod'
import type { Suppression } from '../storage/store.js'
import { accountOf, defineTool } from './define.js'

export const Suppressions = z.object({
  total: z.number().int().describe('Suppressed recipients in all.'),
  skip: z.number().int(),
  limit: z.number().int(),
  suppressions: z.array(
    z.object({
      address: z.string(),
      reason: z.string(),
      since: z.string().describe('ISO 8601, UTC.'),
      mailid: z
        .string()
        .nullable()
        .describe('The message whose bounce put it here (getMessage id); null: the operator.'),
    }),
  ),
})

const entry = (s: Suppression): z.input<typeof Suppressions>['suppressions'][number] => ({
  address: s.address,
  reason: s.reason,
  since: new Date(s.createdAt).toISOString(),
  mailid: s.txid,
})

export const getSuppressions = defineTool({
  name: 'getSuppressions',
  title: 'List suppressed recipients',
  http: { method: 'GET', path: '/mail/suppressions' },
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's suppressed recipients, newest first: mail to them is refused, since a hard bounce " +
    '(or the operator) put them on the local block list. delistBlock with the `address` lifts it. Page with ' +
    'skip and limit.',
  input: z.object({
    skip: z.number().int().min(0).max(2_147_483_647).default(0).describe('Entries to skip.'),
    limit: z.number().int().min(1).max(1000).default(100).describe('Entries per page.'),
  }),
  output: Suppressions,
  handler: async ({ skip, limit }, ctx) => {
    const { total, rows } = await ctx.store.blocks.suppressions(accountOf(ctx), { skip, limit })
    return { total, skip, limit, suppressions: rows.map(entry) }
  },
})
