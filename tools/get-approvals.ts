import { z } from 'zod'
import { Approval, approvalRecord, HOLD_STATUSES } from './approval-schemas.js'
import { accountOf, defineTool } from './define.js'

export const getApprovals = defineTool({
  name: 'getApprovals',
  title: 'Messages held for approval',
  http: { method: 'GET', path: '/mail/approvals' },
  errors: [400],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "The account's messages a send policy held for a person's approval, newest first: those still waiting " +
    '(status held, the default), or those approved or rejected, or all. A person decides them in the console.',
  input: z.object({
    status: z
      .enum([...HOLD_STATUSES, 'all'])
      .default('held')
      .describe('held (waiting), approved, rejected, or all.'),
    skip: z.number().int().min(0).max(2_147_483_647).default(0),
    limit: z.number().int().min(1).max(100).default(20),
  }),
  output: z.object({
    total: z.number().int(),
    skip: z.number().int(),
    limit: z.number().int(),
    approvals: z.array(Approval),
  }),
  handler: async ({ status, skip, limit }, ctx) => {
    const { total, rows } = await ctx.store.holds.list({
      accountId: accountOf(ctx),
      ...(status === 'all' ? {} : { status }),
      skip,
      limit,
    })
    return { total, skip, limit, approvals: rows.map(approvalRecord) }
  },
})
