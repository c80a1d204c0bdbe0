import type pg from 'pg'
import {
  EXPIRY_DECIDER,
  type Hold,
  type HoldRow,
  type HoldStore,
  holdOf,
  type PolicyStore,
  policyOf,
  policyText,
  type SendCountStore,
  sendWindows,
} from '../approval.js'
import { domainOf, type WebhookEvent } from '../store.js'
import { volumeTally } from '../volume-tally.js'
import { acceptedEvents, holdEvent } from '../webhook-events.js'
import { insertMessage } from './enqueue.js'
import { addVolume } from './history.js'
import { changed, transaction } from './pool.js'
import type { OutboxWriter } from './webhooks.js'

/** Holds rejected by expiry in one transaction: a long backlog is worked off in several. */
const EXPIRE_BATCH = 100

/** A hold with its message's envelope (HoldRow), and the message's row for the store's own statements. */
const HOLD = `SELECT h.txid, h.account_id AS "accountId", h.order_id AS "orderId", h.holder, h.holder_label AS "holderLabel",
    h.reason, h.status, h.created_at AS "createdAt", h.expires_at AS "expiresAt", h.decided_at AS "decidedAt",
    h.decided_by AS "decidedBy", h.approval_url AS "approvalUrl", h.elicitation_id AS "elicitationId",
    h.elicitation_state AS "elicitationState", m.env_from AS "envFrom", m.rcpt_to AS "rcptTo", m.subject,
    m.message_id AS "messageId", m.sandbox, h.message_row_id AS "rowId"
  FROM holds h JOIN messages m ON m.id = h.message_row_id`
/** One hold by its transaction id, of the account `$2` unless null. */
const HOLD_BY_TXID = `${HOLD} WHERE h.txid = $1 AND ($2::int IS NULL OR h.account_id = $2)`

type StoredHold = Hold & { rowId: number }
const stored = ({ rowId, ...row }: HoldRow & { rowId: number }): StoredHold => ({ ...holdOf(row), rowId })
const toHold = ({ rowId: _, ...hold }: StoredHold): Hold => hold

/** The holds `txids`, in that order. */
async function holdsOf(db: pg.ClientBase | pg.Pool, txids: string[]): Promise<StoredHold[]> {
  const { rows } = await db.query<HoldRow & { rowId: number }>(`${HOLD} WHERE h.txid = ANY($1::text[])`, [txids])
  const byTxid = new Map(rows.map((r) => [r.txid, stored(r)]))
  return txids.map((txid) => byTxid.get(txid)!)
}

/** Where each kind of holder keeps its policy: every node's settings cache sees a key's or an order's change. */
const HOLDER_TABLE = { key: 'api_keys', grant: 'oauth_grants', order: 'mail_orders' } as const

/** Send policies, by their holder (see PolicyStore). */
export function createPolicyStore(pool: pg.Pool, changing: <T>(change: () => Promise<T>) => Promise<T>): PolicyStore {
  return {
    async get(holder) {
      const { rows } = await pool.query<{ policy: string | null }>(
        `SELECT send_policy AS policy FROM ${HOLDER_TABLE[holder.kind]} WHERE id = $1`,
        [holder.id],
      )
      return rows.length === 0 ? undefined : policyOf(rows[0].policy)
    },
    async set(holder, policy) {
      const update = () =>
        pool.query(`UPDATE ${HOLDER_TABLE[holder.kind]} SET send_policy = $2 WHERE id = $1`, [
          holder.id,
          policyText(policy),
        ])
      // Grants are read afresh at each token's use; keys and orders are cached (their triggers
      // bump the settings counter for the other nodes, `changing` clears this node's cache).
      return changed(await (holder.kind === 'grant' ? update() : changing(update))) > 0
    },
  }
}

/**
 * Counts one send in a window unless it is at `$4` (null: no limit). A send that finds the row at
 * its limit changes nothing and gets no row back. Concurrent upserts of one window take turns on
 * its row, each seeing the count the one before committed: no limit is passed across nodes.
 */
const TAKE = `INSERT INTO send_counts (holder, period, start, count) VALUES ($1, $2, $3, 1)
  ON CONFLICT (holder, period, start) DO UPDATE SET count = send_counts.count + 1
  WHERE $4::int IS NULL OR send_counts.count < $4
  RETURNING count`

/** Thrown inside take's transaction to roll back what it counted: the window that is full. */
class Full {
  constructor(readonly answer: { ok: false; period: 'hour' | 'day'; limit: number; freesAt: number }) {}
}

/** The sends of each policy holder per UTC hour and day (see SendCountStore). */
export function createSendCountStore(pool: pg.Pool): SendCountStore {
  return {
    async take({ holder, now, maxPerHour, maxPerDay }) {
      const windows = sendWindows(now)
      try {
        // The day's row, then the hour's: every take locks them in one order, and when both are
        // full the send is possible only once the day frees.
        return await transaction(pool, async (client) => {
          for (const [period, limit] of [
            ['day', maxPerDay],
            ['hour', maxPerHour],
          ] as const) {
            const { rows } = await client.query(TAKE, [holder, period, windows[period].start, limit])
            if (rows.length === 0) throw new Full({ ok: false, period, limit: limit!, freesAt: windows[period].end })
          }
          return { ok: true } as const
        })
      } catch (err) {
        if (err instanceof Full) return err.answer
        throw err
      }
    },
    async current(holder, now) {
      const { hour, day } = sendWindows(now)
      const { rows } = await pool.query<{ period: 'hour' | 'day'; count: number }>(
        `SELECT period, count FROM send_counts WHERE holder = $1
          AND ((period = 'hour' AND start = $2) OR (period = 'day' AND start = $3))`,
        [holder, hour.start, day.start],
      )
      const of = (period: 'hour' | 'day') => rows.find((r) => r.period === period)?.count ?? 0
      return { hour: of('hour'), day: of('day') }
    },
    async sweep(before) {
      return changed(await pool.query('DELETE FROM send_counts WHERE start < $1', [before]))
    },
  }
}

/**
 * Carries out decisions already recorded in this transaction (their UPDATE ... WHERE status =
 * 'held' returned them, so no other transaction decides them): an approved message's rows become
 * due `now`; a rejected one's end `rejected`, its bytes dropped, counted refused. The events in
 * the same commit, the volume last.
 */
async function settle(client: pg.ClientBase, outbox: OutboxWriter, txids: string[], now: number): Promise<Hold[]> {
  if (txids.length === 0) return []
  const holds = await holdsOf(client, txids)
  const approved = holds.filter((h) => h.status === 'approved')
  const rejected = holds.filter((h) => h.status === 'rejected')
  if (approved.length)
    await client.query(
      `UPDATE deliveries SET state = 'queued', next_attempt_at = $2, response = NULL
      WHERE message_id = ANY($1::bigint[]) AND state = 'held'`,
      [approved.map((h) => h.rowId), now],
    )
  if (rejected.length) {
    const rowIds = rejected.map((h) => h.rowId)
    await client.query(
      `UPDATE deliveries d SET state = 'rejected', response = r.response
      FROM unnest($1::bigint[], $2::text[]) AS r(message_id, response)
      WHERE d.message_id = r.message_id AND d.state = 'held'`,
      [rowIds, rejected.map((h) => `rejected by ${h.decidedBy} at ${new Date(h.decidedAt!).toISOString()}`)],
    )
    // Every row of these messages is final now: their bytes go, as a delivered message's do.
    await client.query('SELECT mailroom_drop_bodies($1::bigint[])', [rowIds])
  }
  const events: WebhookEvent[] = []
  const tally = volumeTally()
  for (const hold of holds) {
    if (hold.status === 'approved')
      events.push(holdEvent('message.approved', hold, now), ...acceptedEvents({ ...hold, time: now }))
    else {
      events.push(holdEvent('message.rejected', hold, now))
      tally.add(hold.orderId, now, 'refused')
    }
  }
  await outbox.write(client, events)
  await addVolume(client, tally)
  return holds.map(toHold)
}

/**
 * Records decisions of the holds `$1` still held: `$3` (approved or rejected) by `$4` at `$2`,
 * except that one past its expiry is rejected by expiry, as of its expiry. A decision arriving
 * while another commits waits for the row, then finds it decided: each hold is decided once,
 * across nodes.
 */
const DECIDE = `UPDATE holds SET
    status = CASE WHEN expires_at <= $2 THEN 'rejected' ELSE $3 END,
    decided_by = CASE WHEN expires_at <= $2 THEN $5 ELSE $4 END,
    decided_at = LEAST(expires_at, $2)
  WHERE txid = ANY($1::text[]) AND status = 'held' AND ($6::int IS NULL OR account_id = $6)
  RETURNING txid, expires_at <= $2 AS expired`

/** Held messages (see HoldStore). */
export function createHoldStore(pool: pg.Pool, outbox: OutboxWriter): HoldStore {
  const get = async (txid: string, accountId?: number) => {
    const { rows } = await pool.query<HoldRow & { rowId: number }>(HOLD_BY_TXID, [txid, accountId ?? null])
    return rows[0] && toHold(stored(rows[0]))
  }

  const decide: HoldStore['decide'] = async ({ txid, accountId, decision, by, now }) =>
    transaction(pool, async (client) => {
      const status = decision === 'approve' ? 'approved' : 'rejected'
      const { rows } = await client.query<{ expired: boolean }>(DECIDE, [
        [txid],
        now,
        status,
        by,
        EXPIRY_DECIDER,
        accountId ?? null,
      ])
      if (rows.length === 0) {
        const { rows: found } = await client.query<HoldRow & { rowId: number }>(HOLD_BY_TXID, [txid, accountId ?? null])
        return found[0] && { state: 'already' as const, hold: toHold(stored(found[0])) }
      }
      const [hold] = await settle(client, outbox, [txid], now)
      // Expired before this decision: it was rejected by expiry, not by this caller.
      return { state: rows[0].expired ? ('already' as const) : ('decided' as const), hold }
    })

  return {
    async create(message, hold) {
      return transaction(pool, async (client) => {
        const { rowId } = await insertMessage(client, message)
        // Never due: no claim, count, retry or cancel of the queue sees these rows until approval.
        await client.query(
          "UPDATE deliveries SET state = 'held', next_attempt_at = NULL, response = $2 WHERE message_id = $1",
          [rowId, hold.response],
        )
        await client.query(
          `INSERT INTO holds (txid, message_row_id, account_id, order_id, holder, holder_label, reason, status,
            created_at, expires_at, approval_url) VALUES ($1, $2, $3, $4, $5, $6, $7, 'held', $8, $9, $10)`,
          [
            message.txid,
            rowId,
            message.accountId,
            message.orderId,
            hold.holder,
            hold.holderLabel,
            hold.reason,
            message.time,
            hold.expiresAt,
            hold.approvalUrl,
          ],
        )
        const [held] = await holdsOf(client, [message.txid])
        await outbox.write(client, [holdEvent('message.held', held, message.time)])
        // Accepted, as a queued message is: its recipients counted last in the transaction.
        const tally = volumeTally()
        tally.add(message.orderId, message.time, 'accepted', message.recipients.length)
        await addVolume(client, tally)
        return toHold(held)
      })
    },
    get,
    async list({ accountId, status, skip, limit }) {
      const where = 'WHERE ($1::int IS NULL OR h.account_id = $1) AND ($2::text IS NULL OR h.status = $2)'
      const params = [accountId ?? null, status ?? null]
      const [total, page] = await Promise.all([
        pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM holds h ${where}`, params),
        pool.query<HoldRow & { rowId: number }>(
          `${HOLD} ${where} ORDER BY h.created_at DESC, h.txid DESC LIMIT $3 OFFSET $4`,
          [...params, limit, skip],
        ),
      ])
      return { total: total.rows[0].n, rows: page.rows.map((r) => toHold(stored(r))) }
    },
    decide,
    async asking({ txid, elicitationId }) {
      return (
        changed(
          await pool.query(
            "UPDATE holds SET elicitation_id = $2, elicitation_state = 'asked' WHERE txid = $1 AND status = 'held'",
            [txid, elicitationId],
          ),
        ) > 0
      )
    },
    async answer({ elicitationId, accountId, action, by, now }) {
      const { rows } = await pool.query<{ txid: string }>(
        'SELECT txid FROM holds WHERE elicitation_id = $1 AND account_id = $2',
        [elicitationId, accountId],
      )
      if (rows.length === 0) return undefined
      const { txid } = rows[0]
      if (action !== 'cancel')
        return (await decide({ txid, accountId, decision: action === 'accept' ? 'approve' : 'reject', by, now }))?.hold
      // Left held: the person dismissed the question, to decide later in the console.
      await pool.query(
        "UPDATE holds SET elicitation_state = 'cancelled' WHERE elicitation_id = $1 AND status = 'held'",
        [elicitationId],
      )
      return get(txid, accountId)
    },
    async expire(now) {
      let total = 0
      for (;;) {
        const count = await transaction(pool, async (client) => {
          // SKIP LOCKED: a hold another node decides or expires at this moment is left to it.
          const { rows: due } = await client.query<{ txid: string }>(
            `SELECT txid FROM holds WHERE status = 'held' AND expires_at <= $1
            ORDER BY expires_at, txid LIMIT $2 FOR UPDATE SKIP LOCKED`,
            [now, EXPIRE_BATCH],
          )
          if (due.length === 0) return 0
          const { rows } = await client.query<{ txid: string }>(DECIDE, [
            due.map((r) => r.txid),
            now,
            'rejected',
            EXPIRY_DECIDER,
            EXPIRY_DECIDER,
            null,
          ])
          await settle(
            client,
            outbox,
            rows.map((r) => r.txid),
            now,
          )
          return rows.length
        })
        total += count
        if (count < EXPIRE_BATCH) return total
      }
    },
  }
}

/** An address with its domain in lower case, as a log may keep it. */
const domainLowered = (address: string) => {
  const at = address.lastIndexOf('@')
  return address.slice(0, at + 1) + address.slice(at + 1).toLowerCase()
}

/**
 * Which of `recipients` (in lower case), and of their domains, the account has a released
 * delivery to: any state but held and rejected, on any of its orders. The log keeps a recipient
 * as it was written, so each address is looked for as asked, in lower case, and with its domain
 * alone in lower case. Each lookup is an EXISTS on the (order_id, recipient) or (order_id, domain)
 * index, which stops at the first row found however much was sent there.
 */
export async function sentBefore(
  pool: pg.Pool,
  accountId: number,
  recipients: string[],
): Promise<{ addresses: Set<string>; domains: Set<string> }> {
  const spellings = new Map<string, string>()
  for (const r of recipients) for (const s of [r, r.toLowerCase(), domainLowered(r)]) spellings.set(s, r.toLowerCase())
  const released = (column: string, value: string) =>
    `EXISTS (SELECT 1 FROM deliveries d WHERE d.order_id = ANY(ARRAY(SELECT id FROM mail_orders WHERE account_id = $1))
      AND d.${column} = ${value} AND d.state NOT IN ('held', 'rejected'))`
  const { rows } = await pool.query<{ kind: 'address' | 'domain'; value: string }>(
    `SELECT 'address' AS kind, s.lower AS value FROM unnest($2::text[], $3::text[]) AS s(spelling, lower)
      WHERE ${released('recipient', 's.spelling')}
    UNION SELECT 'domain', x FROM unnest($4::text[]) AS x WHERE ${released('domain', 'x')}`,
    [accountId, [...spellings.keys()], [...spellings.values()], [...new Set(recipients.map(domainOf))]],
  )
  return {
    addresses: new Set(rows.filter((r) => r.kind === 'address').map((r) => r.value)),
    domains: new Set(rows.filter((r) => r.kind === 'domain').map((r) => r.value)),
  }
}
