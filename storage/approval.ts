import type { NewMessage } from './store.js'

/**
 * A person in charge of what an agent sends (issue #38): send policies per API key, OAuth grant
 * and mail order, the counters of their rate limits, and held messages waiting for a person's
 * decision. The types are the contract between the pipeline (relay/policy.ts), the tools and
 * the stores; docs/approval.md says what each does for a user.
 */

export type ApprovalMode = 'none' | 'new-recipients' | 'always'

/** A key's, grant's or order's send policy. No policy at all (null) keeps the behaviour without one. */
export interface SendPolicy {
  approval: ApprovalMode
  /** A send to more recipients than this needs approval; null: no such limit. */
  approveAbove: number | null
  /** Sends per UTC hour (at least 1 when set); null: no limit. */
  maxPerHour: number | null
  /** Sends per UTC day (at least 1 when set); null: no limit. */
  maxPerDay: number | null
  /** Lower case `user@example.com` or `@example.com`; empty: any recipient. */
  allowedRecipients: string[]
}

export const DEFAULT_POLICY: SendPolicy = {
  approval: 'none',
  approveAbove: null,
  maxPerHour: null,
  maxPerDay: null,
  allowedRecipients: [],
}

/** What a policy belongs to: an API key, an OAuth grant, or a mail order (SMTP submission has no key). */
export interface PolicyHolder {
  kind: 'key' | 'grant' | 'order'
  id: number
}

/** The holder as the counters and holds name it: `key:3`, `grant:7`, `order:1`. */
export const holderKey = (h: PolicyHolder) => `${h.kind}:${h.id}`

/** The holder in words, as refusals and the console name it. */
export const holderLabel = (h: PolicyHolder) =>
  h.kind === 'key' ? `API key ${h.id}` : h.kind === 'grant' ? `OAuth grant ${h.id}` : `mail order mb${h.id}`

export type HoldStatus = 'held' | 'approved' | 'rejected'

/** What is known of a hold when its message is stored. */
export interface NewHold {
  /** holderKey of the policy that held it. */
  holder: string
  /** holderLabel of it. */
  holderLabel: string
  /** Why it needs approval, in words ("first mail to example.org", "12 recipients, above 10"). */
  reason: string
  expiresAt: number
  /** The console page that decides it. */
  approvalUrl: string
  /** What the log's rows say while it is held (their `response`). */
  response: string
}

/** A held message and what became of it. Its id is the message's transaction id. */
export interface Hold extends Omit<NewHold, 'response'> {
  txid: string
  accountId: number
  orderId: number
  status: HoldStatus
  createdAt: number
  decidedAt: number | null
  /** Who decided, in words: 'API key 1 (console or API)', 'the operator (mailroom approvals)', 'the person at the MCP client', 'expiry (MAILROOM_APPROVAL_TTL)'. */
  decidedBy: string | null
  /** The id of the elicitation that asks the person at the MCP client, while there is one. */
  elicitationId: string | null
  /** 'asked' while the person is being asked; 'cancelled' once they dismissed the question. */
  elicitationState: 'asked' | 'cancelled' | null
  envFrom: string
  recipients: string[]
  subject: string | null
  messageId: string | null
  sandbox: boolean
}

/** `decided` by this call, or `already` decided before it (the hold as it stands). */
export interface HoldDecision {
  state: 'decided' | 'already'
  hold: Hold
}

/** The elicitation modes an MCP client declared (MCP 2025-11-25: `{}` is form mode). */
export interface ElicitationModes {
  form: boolean
  url: boolean
}

/** message.held, message.approved, message.rejected: one event per message. */
export interface HoldEventData {
  transactionId: string
  from: string
  recipients: string[]
  subject: string | null
  messageId: string | null
  reason: string
  holder: string
  approvalUrl: string
  /** ISO 8601. */
  expiresAt: string
  decidedBy: string | null
}

export interface PolicyStore {
  /** The holder's policy: null when it has none; undefined when there is no such key, grant or order. */
  get(holder: PolicyHolder): Promise<SendPolicy | null | undefined>
  /** Sets it (null clears it); false when there is no such holder. Every node sees it at once. */
  set(holder: PolicyHolder, policy: SendPolicy | null): Promise<boolean>
}

export type SendCountAnswer = { ok: true } | { ok: false; period: 'hour' | 'day'; limit: number; freesAt: number }

export interface SendCountStore {
  /**
   * Counts one send in the holder's UTC hour and UTC day, atomically across nodes, unless either
   * is at its limit: then counts nothing and answers which window is full and when it frees (ms).
   */
  take(input: {
    holder: string
    now: number
    maxPerHour: number | null
    maxPerDay: number | null
  }): Promise<SendCountAnswer>
  /** The sends counted in the current UTC hour and day. */
  current(holder: string, now: number): Promise<{ hour: number; day: number }>
  /** Deletes the windows that started before `before`; how many. */
  sweep(before: number): Promise<number>
}

export interface HoldStore {
  /**
   * Stores a message held, in one commit: its row, body and delivery rows (never due, so the
   * queue never takes them; their `response` is `hold.response`), the hold, message.held for the
   * account's webhooks, the volume's `accepted`. Nothing goes to the queue.
   */
  create(message: NewMessage, hold: NewHold): Promise<Hold>
  /** By transaction id; only the account's when given (the operator's command gives none). */
  get(txid: string, accountId?: number): Promise<Hold | undefined>
  /** Newest first. */
  list(query: { accountId?: number; status?: HoldStatus; skip: number; limit: number }): Promise<{
    total: number
    rows: Hold[]
  }>
  /**
   * Decides a hold once, atomically across nodes. Approve: its rows become due `now`
   * (message.approved, then message.accepted per recipient). Reject: its rows end `rejected`,
   * the body is dropped (message.rejected; the volume's `refused`). A hold past its expiry is
   * rejected by expiry first and answered `already`. Undefined when there is none (of the account).
   */
  decide(input: {
    txid: string
    accountId?: number
    decision: 'approve' | 'reject'
    by: string
    now: number
  }): Promise<HoldDecision | undefined>
  /** Records that the person is being asked (the elicitation's id, unique); false when it is no longer held. */
  asking(input: { txid: string; elicitationId: string }): Promise<boolean>
  /**
   * An elicitation's answer, from whichever node received it: accept approves, decline rejects,
   * cancel leaves it held (elicitationState 'cancelled'). Undefined when no hold of the account
   * has that elicitation id.
   */
  answer(input: {
    elicitationId: string
    accountId: number
    action: 'accept' | 'decline' | 'cancel'
    by: string
    now: number
  }): Promise<Hold | undefined>
  /** Rejects every hold whose expiry is at or before `now` (by 'expiry (MAILROOM_APPROVAL_TTL)'); how many. */
  expire(now: number): Promise<number>
}

/** Who decides a hold that waited past its expiry. */
export const EXPIRY_DECIDER = 'expiry (MAILROOM_APPROVAL_TTL)'

/** A stored send policy (JSON text, both backends) as the Store answers it; a field it lacks takes its default. */
export const policyOf = (stored: string | null): SendPolicy | null =>
  stored === null ? null : { ...DEFAULT_POLICY, ...(JSON.parse(stored) as Partial<SendPolicy>) }

/** A send policy as both backends store it. */
export const policyText = (policy: SendPolicy | null | undefined): string | null =>
  policy ? JSON.stringify(policy) : null

/** Elicitation modes as both backends store them: 'form', 'url', 'form,url', or null for none. */
export const elicitationText = (modes: ElicitationModes | null | undefined): string | null =>
  [modes?.form && 'form', modes?.url && 'url'].filter(Boolean).join(',') || null

export const elicitationOf = (stored: string | null): ElicitationModes | null => {
  if (!stored) return null
  const modes = stored.split(',')
  return { form: modes.includes('form'), url: modes.includes('url') }
}

/** The fixed UTC windows a send counts in, and when each frees. */
export const sendWindows = (now: number) => {
  const hour = now - (now % 3_600_000)
  const day = now - (now % 86_400_000)
  return { hour: { start: hour, end: hour + 3_600_000 }, day: { start: day, end: day + 86_400_000 } }
}

/** A hold's row joined with its message's, as both backends read it (their column names mapped). */
export interface HoldRow extends Omit<Hold, 'recipients' | 'sandbox'> {
  /** The message's envelope recipients, comma-separated. */
  rcptTo: string
  sandbox: boolean | number
}

export const holdOf = ({ rcptTo, sandbox, ...row }: HoldRow): Hold => ({
  ...row,
  // Epoch ms: PostgreSQL's bigint may come back as a string.
  createdAt: Number(row.createdAt),
  expiresAt: Number(row.expiresAt),
  decidedAt: row.decidedAt === null ? null : Number(row.decidedAt),
  recipients: rcptTo.split(','),
  sandbox: sandbox === true || sandbox === 1,
})
