import type Database from 'better-sqlite3'
import {
  EXPIRY_DECIDER,
  type Hold,
  type HoldRow,
  type HoldStore,
  holdOf,
  type PolicyHolder,
  type PolicyStore,
  policyOf,
  policyText,
  type SendCountStore,
  sendWindows,
} from '../approval.js'
import { domainOf, type Store } from '../store.js'
import { acceptedEvents, holdEvent } from '../webhook-events.js'
import type { VolumeCounter } from './history.js'
import { messageInserter } from './mail.js'
import type { OutboxWriter } from './webhooks.js'

const HOLD_COLUMNS = `h.txid, h.account_id AS accountId, h.order_id AS orderId, h.holder, h.holder_label AS holderLabel,
  h.reason, h.status, h.created_at AS createdAt, h.expires_at AS expiresAt, h.decided_at AS decidedAt,
  h.decided_by AS decidedBy, h.approval_url AS approvalUrl, h.elicitation_id AS elicitationId,
  h.elicitation_state AS elicitationState, m.env_from AS envFrom, m.rcpt_to AS rcptTo, m.subject,
  m.message_id AS messageId, m.sandbox`
const HOLDS = 'holds h JOIN messages m ON m.id = h.message_row_id'

/** A hold by its transaction id, and of the account when given (a message's story reads it too). */
export function holdReader(sqlite: Database.Database) {
  const byTxid = sqlite.prepare(
    `SELECT ${HOLD_COLUMNS} FROM ${HOLDS} WHERE h.txid = @txid AND (@accountId IS NULL OR h.account_id = @accountId)`,
  )
  return (txid: string, accountId?: number): Hold | undefined => {
    const row = byTxid.get({ txid, accountId: accountId ?? null }) as HoldRow | undefined
    return row && holdOf(row)
  }
}

/** The table and column of each kind of policy holder. */
const HOLDER_TABLES = { key: 'api_keys', grant: 'oauth_grants', order: 'mail_orders' } as const

/** Send policies, kept on the API key, OAuth grant or mail order they belong to. */
export function createPolicyStore(sqlite: Database.Database, changing: <T>(change: () => T) => T): PolicyStore {
  const statements = (kind: PolicyHolder['kind']) => ({
    get: sqlite.prepare(`SELECT send_policy FROM ${HOLDER_TABLES[kind]} WHERE id = ?`),
    set: sqlite.prepare(`UPDATE ${HOLDER_TABLES[kind]} SET send_policy = ? WHERE id = ?`),
  })
  const q = { key: statements('key'), grant: statements('grant'), order: statements('order') }
  return {
    async get({ kind, id }) {
      const row = q[kind].get.get(id) as { send_policy: string | null } | undefined
      return row && policyOf(row.send_policy)
    },
    async set({ kind, id }, policy) {
      // Keys and orders are read through the settings cache (their triggers bump its counter for
      // the other processes); grants are read fresh with each token.
      return changing(() => q[kind].set.run(policyText(policy), id)).changes > 0
    },
  }
}

/** A holder's sends per UTC hour and day. */
export function createSendCountStore(sqlite: Database.Database): SendCountStore {
  const read = sqlite.prepare('SELECT count FROM send_counts WHERE holder = ? AND period = ? AND start = ?').pluck()
  const add = sqlite.prepare(`INSERT INTO send_counts (holder, period, start, count) VALUES (?, ?, ?, 1)
    ON CONFLICT (holder, period, start) DO UPDATE SET count = count + 1`)
  const sweep = sqlite.prepare('DELETE FROM send_counts WHERE start < ?')
  const countOf = (holder: string, period: 'hour' | 'day', start: number) =>
    (read.get(holder, period, start) as number | undefined) ?? 0
  // IMMEDIATE: the write lock is held from the read to the count, so that two processes at the
  // limit cannot both count the last send.
  const take = sqlite.transaction((input: Parameters<SendCountStore['take']>[0]) => {
    const { holder, now } = input
    const windows = sendWindows(now)
    // The day first: when both are full, the send is possible only once the day frees.
    for (const [period, limit] of [
      ['day', input.maxPerDay],
      ['hour', input.maxPerHour],
    ] as const)
      if (limit !== null && countOf(holder, period, windows[period].start) >= limit)
        return { ok: false as const, period, limit, freesAt: windows[period].end }
    add.run(holder, 'hour', windows.hour.start)
    add.run(holder, 'day', windows.day.start)
    return { ok: true as const }
  }).immediate
  return {
    async take(input) {
      return take(input)
    },
    async current(holder, now) {
      const windows = sendWindows(now)
      return { hour: countOf(holder, 'hour', windows.hour.start), day: countOf(holder, 'day', windows.day.start) }
    },
    async sweep(before) {
      return sweep.run(before).changes
    },
  }
}

/**
 * Held messages. A hold's message is stored like any other, but its delivery rows are `held` and
 * have no next attempt: every queue statement skips them (they require one), so nothing is sent
 * until approval makes them due. Not to be confused with the queue's "held" of a leased row.
 */
export function createHoldStore(
  sqlite: Database.Database,
  { outbox, volume }: { outbox: Pick<OutboxWriter, 'write'>; volume: VolumeCounter },
): HoldStore {
  const insertMessage = messageInserter(sqlite, volume)
  const hold = holdReader(sqlite)
  const q = {
    markHeld: sqlite.prepare(
      "UPDATE deliveries SET state = 'held', next_attempt_at = NULL, response = ? WHERE message_id = ?",
    ),
    insert: sqlite.prepare(`INSERT INTO holds (txid, message_row_id, account_id, order_id, holder, holder_label, reason,
      status, created_at, expires_at, approval_url) VALUES (@txid, @rowId, @accountId, @orderId, @holder, @holderLabel,
      @reason, 'held', @createdAt, @expiresAt, @approvalUrl)`),
    decide: sqlite.prepare(`UPDATE holds SET status = @status, decided_at = @decidedAt, decided_by = @by
      WHERE txid = @txid AND status = 'held' RETURNING message_row_id AS rowId`),
    release: sqlite.prepare(`UPDATE deliveries SET state = 'queued', next_attempt_at = ?, response = NULL
      WHERE message_id = ? AND state = 'held'`),
    reject: sqlite.prepare(
      "UPDATE deliveries SET state = 'rejected', response = ? WHERE message_id = ? AND state = 'held'",
    ),
    dropBody: sqlite.prepare('DELETE FROM message_bodies WHERE message_id = ?'),
    byElicitation: sqlite.prepare('SELECT txid FROM holds WHERE elicitation_id = ? AND account_id = ?').pluck(),
    asking: sqlite.prepare(
      "UPDATE holds SET elicitation_id = ?, elicitation_state = 'asked' WHERE txid = ? AND status = 'held'",
    ),
    cancelled: sqlite.prepare(
      "UPDATE holds SET elicitation_state = 'cancelled' WHERE elicitation_id = ? AND status = 'held'",
    ),
    expired: sqlite
      .prepare("SELECT txid FROM holds INDEXED BY holds_expires WHERE status = 'held' AND expires_at <= ?")
      .pluck(),
  }
  // One pair of statements per combination of filters, so that each is answered from the
  // (account_id, status, created_at) index; the rowid orders the holds of one millisecond.
  const listing = new Map<string, { count: Database.Statement; rows: Database.Statement }>()
  const listingOf = (accountId: boolean, status: boolean) => {
    const key = `${accountId} ${status}`
    let st = listing.get(key)
    if (!st) {
      const where = [accountId && 'h.account_id = @accountId', status && 'h.status = @status'].filter(Boolean)
      const filter = where.length ? `WHERE ${where.join(' AND ')}` : ''
      st = {
        count: sqlite.prepare(`SELECT COUNT(*) FROM holds h ${filter}`).pluck(),
        rows: sqlite.prepare(
          `SELECT ${HOLD_COLUMNS} FROM ${HOLDS} ${filter} ORDER BY h.created_at DESC, h.rowid DESC LIMIT @limit OFFSET @skip`,
        ),
      }
      listing.set(key, st)
    }
    return st
  }

  /**
   * Decides a hold still held, inside the caller's transaction: its rows, the body and volume of
   * a rejection, and the events. `at` is when it counts as decided (an expired one: its expiry).
   */
  const settle = (held: Hold, decision: 'approve' | 'reject', by: string, at: number, now: number): Hold => {
    const status = decision === 'approve' ? 'approved' : 'rejected'
    const row = q.decide.get({ txid: held.txid, status, decidedAt: at, by }) as { rowId: number } | undefined
    if (!row) return hold(held.txid)!
    volume.begin()
    if (decision === 'approve') q.release.run(now, row.rowId)
    else {
      q.reject.run(`rejected by ${by} at ${new Date(at).toISOString()}`, row.rowId)
      q.dropBody.run(row.rowId)
      volume.add(held.orderId, now, 'refused')
    }
    volume.end()
    const decided = hold(held.txid)!
    outbox.write([
      holdEvent(decision === 'approve' ? 'message.approved' : 'message.rejected', decided, now),
      ...(decision === 'approve' ? acceptedEvents({ ...decided, time: now }) : []),
    ])
    return decided
  }
  const decideIn = (input: Parameters<HoldStore['decide']>[0]) => {
    const held = hold(input.txid, input.accountId)
    if (!held) return undefined
    if (held.status !== 'held') return { state: 'already' as const, hold: held }
    if (held.expiresAt <= input.now)
      return { state: 'already' as const, hold: settle(held, 'reject', EXPIRY_DECIDER, held.expiresAt, input.now) }
    return { state: 'decided' as const, hold: settle(held, input.decision, input.by, input.now, input.now) }
  }
  const decide = sqlite.transaction(decideIn).immediate
  const create = sqlite.transaction((m: Parameters<HoldStore['create']>[0], h: Parameters<HoldStore['create']>[1]) => {
    volume.begin()
    const { rowId } = insertMessage({ message: m })
    volume.end()
    q.markHeld.run(h.response, rowId)
    q.insert.run({ ...h, txid: m.txid, rowId, accountId: m.accountId, orderId: m.orderId, createdAt: m.time })
    const held = hold(m.txid)!
    outbox.write([holdEvent('message.held', held, m.time)])
    return held
  }).immediate
  const answer = sqlite.transaction((input: Parameters<HoldStore['answer']>[0]) => {
    const txid = q.byElicitation.get(input.elicitationId, input.accountId) as string | undefined
    if (txid === undefined) return undefined
    if (input.action === 'cancel') {
      q.cancelled.run(input.elicitationId)
      return hold(txid)
    }
    const decision = input.action === 'accept' ? 'approve' : 'reject'
    return decideIn({ txid, accountId: input.accountId, decision, by: input.by, now: input.now })?.hold
  }).immediate
  const expire = sqlite.transaction((now: number) => {
    let n = 0
    for (const txid of q.expired.all(now) as string[]) {
      const held = hold(txid)!
      if (settle(held, 'reject', EXPIRY_DECIDER, held.expiresAt, now).status === 'rejected') n++
    }
    return n
  }).immediate

  return {
    async create(message, h) {
      return create(message, h)
    },
    async get(txid, accountId) {
      return hold(txid, accountId)
    },
    async list({ accountId, status, skip, limit }) {
      const st = listingOf(accountId !== undefined, status !== undefined)
      const where = { ...(accountId !== undefined && { accountId }), ...(status !== undefined && { status }) }
      return {
        total: st.count.get(where) as number,
        rows: (st.rows.all({ ...where, skip, limit }) as HoldRow[]).map(holdOf),
      }
    },
    async decide(input) {
      return decide(input)
    },
    async asking({ txid, elicitationId }) {
      return q.asking.run(elicitationId, txid).changes > 0
    },
    async answer(input) {
      return answer(input)
    },
    async expire(now) {
      return expire(now)
    },
  }
}

const domainLowered = (address: string) => {
  const at = address.lastIndexOf('@')
  return address.slice(0, at + 1) + address.slice(at + 1).toLowerCase()
}

const RELEASED = "state NOT IN ('held', 'rejected')"
const ACCOUNT_ORDERS = 'order_id IN (SELECT id FROM mail_orders WHERE account_id = @accountId)'

/**
 * The look-ups of sentBefore: an address in any of its spellings (JSON), and a domain; exported
 * for the test of their plans. The index is named: with the statistics of a log where most mail
 * goes to a few domains, the planner reckons a walk of the table cheaper for a LIMIT 1, and walks
 * it all when the address is new.
 */
export const SENT_BEFORE = {
  address: `SELECT 1 FROM deliveries INDEXED BY deliveries_order_recipient WHERE ${ACCOUNT_ORDERS}
    AND recipient IN (SELECT value FROM json_each(@spellings)) AND ${RELEASED} LIMIT 1`,
  domain: `SELECT 1 FROM deliveries INDEXED BY deliveries_order_domain WHERE ${ACCOUNT_ORDERS} AND domain = @domain
    AND ${RELEASED} LIMIT 1`,
}

/**
 * Which addresses and domains the account ever had a released delivery to (Store['mail']['sentBefore']):
 * one seek per address and per domain into the (order_id, recipient) and (order_id, domain)
 * indexes, each stopping at the first row found.
 */
export function sentBeforeReader(sqlite: Database.Database): Store['mail']['sentBefore'] {
  const address = sqlite.prepare(SENT_BEFORE.address).pluck()
  const domain = sqlite.prepare(SENT_BEFORE.domain).pluck()
  const read = sqlite.transaction((accountId: number, recipients: string[]) => {
    const addresses = new Set<string>()
    const domains = new Set<string>()
    for (const lower of new Set(recipients.map((r) => r.toLowerCase()))) {
      // The log keeps a recipient as it was written: the spellings asked, in lower case, and with
      // the domain alone in lower case. Another spelling is not found, and the address counts as
      // new: the safe side (a person is asked once more), where a case-blind look-up would scan
      // every row of the domain.
      const asked = recipients.filter((r) => r.toLowerCase() === lower)
      const spellings = new Set([lower, ...asked, ...asked.map(domainLowered)])
      if (address.get({ accountId, spellings: JSON.stringify([...spellings]) }) !== undefined) addresses.add(lower)
    }
    for (const d of new Set(recipients.map(domainOf)))
      if (domain.get({ accountId, domain: d }) !== undefined) domains.add(d)
    return { addresses, domains }
  })
  return async (accountId, recipients) => read(accountId, recipients)
}
