import { z } from 'zod'
import { MailroomError, notFound } from '../errors.js'
import type { Hold, SendPolicy } from '../storage/store.js'
import { accountOf, type ToolContext } from './define.js'

// What the approval tools share (docs/approval.md): a policy and a held message as they show
// them, and who may decide a held message. `mailroom approvals` loads it too: it imports no more
// than zod and the errors.

const iso = (ms: number) => new Date(ms).toISOString()

export const SendPolicyOut = z
  .object({
    approval: z
      .enum(['none', 'new-recipients', 'always'])
      .describe('Which sends wait for a person: none, those to a recipient never sent to, or every one.'),
    approveAbove: z.number().int().nullable().describe('A send to more recipients than this waits; null: no limit.'),
    maxPerHour: z.number().int().nullable().describe('Sends per UTC hour; null: no limit.'),
    maxPerDay: z.number().int().nullable().describe('Sends per UTC day; null: no limit.'),
    allowedRecipients: z
      .array(z.string())
      .describe('The only recipients it may send to (`user@example.com`, `@example.com`); empty: any.'),
  })
  .meta({ title: 'SendPolicy' })

export const policyRecord = (p: SendPolicy): z.input<typeof SendPolicyOut> => ({
  approval: p.approval,
  approveAbove: p.approveAbove,
  maxPerHour: p.maxPerHour,
  maxPerDay: p.maxPerDay,
  allowedRecipients: [...p.allowedRecipients],
})

export const HOLD_STATUSES = ['held', 'approved', 'rejected'] as const

export const Approval = z
  .object({
    id: z.string().describe('The transaction id of the held message (getMessage, getMessageContent).'),
    status: z.enum(HOLD_STATUSES),
    from: z.string().describe('Envelope sender.'),
    to: z.array(z.string()).describe('Recipients.'),
    subject: z.string().nullable(),
    reason: z.string().describe('Why it needs approval.'),
    holder: z.string().describe('Whose send policy held it: "API key 3", "OAuth grant 7", "mail order mb1".'),
    createdAt: z.string().describe('When it was held (ISO 8601).'),
    expiresAt: z.string().describe('When it is rejected unless decided before (ISO 8601).'),
    decidedAt: z.string().nullable(),
    decidedBy: z
      .string()
      .nullable()
      .describe('Who decided: a key in the console, the operator, the person at the MCP client, or expiry.'),
    approvalUrl: z.string().describe('The console page that decides it.'),
    sandbox: z.boolean().optional().describe('True for sandbox mail: approved, it is recorded but never sent.'),
  })
  .meta({ title: 'Approval' })

export const approvalRecord = (h: Hold): z.input<typeof Approval> => ({
  id: h.txid,
  status: h.status,
  from: h.envFrom,
  to: h.recipients,
  subject: h.subject,
  reason: h.reason,
  holder: h.holderLabel,
  createdAt: iso(h.createdAt),
  expiresAt: iso(h.expiresAt),
  decidedAt: h.decidedAt === null ? null : iso(h.decidedAt),
  decidedBy: h.decidedBy,
  approvalUrl: h.approvalUrl,
  ...(h.sandbox ? { sandbox: true } : {}),
})

export const HeldId = z.object({
  id: z
    .string()
    .regex(/^[0-9a-fA-F]{18,19}$/, 'must be a transaction id: 18 or 19 hex characters')
    .describe("Transaction id of the held message (a send's `text`, getApprovals' `id`)."),
})

/** What a decision answers and how it is described, per decision. */
const DONE = {
  approve: { verb: 'approved', text: 'approved: queued for delivery' },
  reject: { verb: 'rejected', text: 'rejected: it will never be sent' },
} as const

/** A decided hold's decision in words: "was approved at … by …", "expired at … and was rejected …". */
export function decisionInWords(h: Hold): string {
  const at = h.decidedAt === null ? '' : ` at ${iso(h.decidedAt)}`
  if (h.decidedBy?.startsWith('expiry')) return `expired${at} and was rejected (MAILROOM_APPROVAL_TTL)`
  return `was ${h.status}${at}${h.decidedBy ? ` by ${h.decidedBy}` : ''}`
}

/**
 * Approves or rejects a held message of the caller's account, as a person. An agent must not
 * decide its own holds: an access token (an MCP client's agent) and a key under a send policy are
 * refused before anything is read; a sandbox key may decide sandbox mail only.
 */
export async function decide(ctx: ToolContext, id: string, decision: 'approve' | 'reject') {
  const { verb, text } = DONE[decision]
  if (ctx.scopes)
    throw new MailroomError(
      403,
      `id: not ${verb}: a held message is decided by a person, with an API key in the console or the operator's mailroom approvals, not with an access token`,
    )
  if (ctx.policy)
    throw new MailroomError(
      403,
      `id: not ${verb}: this API key is under a send policy, and may not decide held messages; a key without one may (the console), or the operator (mailroom approvals)`,
    )
  const accountId = accountOf(ctx)
  const txid = id.toLowerCase()
  const held = await ctx.store.holds.get(txid, accountId)
  if (!held) throw notFound(`id: no held message ${id}`)
  if (ctx.sandbox && !held.sandbox)
    throw new MailroomError(403, `id: not ${verb}: a sandbox key may decide sandbox mail only, and ${id} is real mail`)
  const by = ctx.holder?.kind === 'key' ? `API key ${ctx.holder.id} (console or API)` : 'an API key (console or API)'
  const done = await ctx.store.holds.decide({ txid, accountId, decision, by, now: ctx.clock() })
  if (!done) throw notFound(`id: no held message ${id}`)
  if (done.state === 'already')
    throw new MailroomError(409, `id: message ${txid} was not ${verb}: it ${decisionInWords(done.hold)}`)
  ctx.logger.info({ account: accountId, txid, by }, `held message ${verb}`)
  return { status: 'ok', text: `${txid} ${text}` }
}
