import { z } from 'zod'
import { DEFAULT_POLICY, holderKey, holderLabel } from '../storage/store.js'
import { SendPolicyOut, policyRecord } from './approval-schemas.js'
import { accountOf, defineTool } from './define.js'

export const getSendPolicy = defineTool({
  name: 'getSendPolicy',
  title: 'My send policy',
  http: { method: 'GET', path: '/policy' },
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "The send policy the caller's sends are held to (its API key's or OAuth grant's): which sends wait for a " +
    "person's approval, the hourly and daily limits with what this hour and day used, and the recipients " +
    'allowed. No policy: every send goes as is.',
  input: z.object({}),
  output: z.object({
    holder: z.string().describe('What the policy belongs to: "API key 3", "OAuth grant 7"; "none" without one.'),
    policy: SendPolicyOut,
    used: z
      .object({
        hour: z.number().int().describe('Sends counted this UTC hour.'),
        day: z.number().int().describe('Sends counted this UTC day.'),
      })
      .describe('What the limits counted so far (zero without a policy: nothing is counted).'),
  }),
  handler: async (_input, ctx) => {
    accountOf(ctx)
    if (!ctx.holder || !ctx.policy)
      return {
        holder: ctx.holder ? holderLabel(ctx.holder) : 'none',
        policy: policyRecord(DEFAULT_POLICY),
        used: { hour: 0, day: 0 },
      }
    const used = await ctx.store.sendCounts.current(holderKey(ctx.holder), ctx.clock())
    return { holder: holderLabel(ctx.holder), policy: policyRecord(ctx.policy), used }
  },
})
