import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { EngineMetrics } from '../metrics.js'
import {
  byteLength,
  joinPieces,
  type AttemptOutcome,
  type NewMessage,
  type QueueItem,
  type SenderReport,
  type Store,
  type WebhookEvent,
  newEventId,
} from '../storage/store.js'
import { classify, nextAttempt } from './bounces.js'
import { Destinations } from './destinations.js'
import type { AppliedPolicy } from './mta-sts.js'
import type { Attempt } from './mx-client.js'
import { senderReports } from './reports.js'
import { sandboxAttempt } from './sandbox.js'
import { cut } from './smtp-session.js'
import type { MxResolver } from './routes.js'
import type { TlsReports } from './tls-reports.js'
import { createTxidGenerator } from './txid.js'

/** How often a live worker renews the leases it holds, as a share of the lease timeout (MAILROOM_LEASE_TIMEOUT). */
const RENEW_SHARE = 1 / 5
/** How often the queue is looked at when nothing wakes the worker. */
const POLL_MS = 1_000
/** Most recipients in one SMTP transaction (RFC 5321 §4.5.3.1.8 requires servers to take 100). */
const MAX_RCPTS_PER_TRANSACTION = 100
/**
 * A message leased as it is accepted keeps its bytes in memory up to this size (at most a claim's
 * worth of messages wait, 200 by default: 13 MB); a larger one is read back from the queue.
 */
const BODY_IN_MEMORY_MAX = 64 * 1024
/** Characters of a destination's reply kept in the log: a page of the log stays small, whatever a server says. */
export const MAX_STORED_RESPONSE = 4096

export interface DeliveryDeps {
  store: Store
  config: Pick<Config, 'delivery' | 'nodeName' | 'reports' | 'inbound' | 'webhooks' | 'tlsReports'>
  logger: Logger
  clock: () => number
  resolver: MxResolver
  /** The name its leases are held under (`assigned` on the log rows); config.nodeName unless given. */
  node?: string
  /** Where each attempt's outcome is counted, if anywhere. */
  metrics?: Pick<EngineMetrics, 'delivery'>
  /** The port of MTA-STS policy hosts: 443 (RFC 8461 §3.3) unless a test serves elsewhere. */
  policyPort?: number
}

/** Recipients of one message at one domain (one SMTP transaction), and the message's bytes when they are at hand. */
interface Group {
  items: QueueItem[]
  body?: Buffer
}

/**
 * The delivery worker: leases due recipients from the durable queue, groups them by message and
 * destination domain (one SMTP transaction each), delivers within the global and per-domain
 * concurrency limits, and records every attempt on the log row. Messages accepted through
 * `accept` while it has room are leased as they are committed and start at once.
 */
export class DeliveryWorker {
  private running = false
  private loopDone: Promise<void> = Promise.resolve()
  private wake: (() => void) | null = null
  /** Every delivery under way, until its outcome is known. */
  private inFlight = new Set<Promise<void>>()
  /**
   * Deliveries holding a slot of the concurrency limits: a delivery gives its slot back once its
   * message is out (its connection can then carry the next one), before the reply to it.
   */
  private active = 0
  /** Outcomes on their way into the queue (a delivery slot is free again before its commit). */
  private recording = new Set<Promise<void>>()
  private perDomain = new Map<string, number>()
  /** Groups waiting for a connection, by destination domain (a domain at its limit is passed over whole). */
  private waiting = new Map<string, Group[]>()
  private waitingCount = 0
  /** Messages accepted into delivery whose commit is still under way. */
  private reserved = 0
  /**
   * Whether the queue may hold due rows that nobody leased: false after a claim took all there
   * were, true again when a message is left in the queue, on kick(), and at every poll (retries
   * come due, other nodes' leases expire). A delivery that frees a slot claims only then.
   */
  private due = true
  private renewedAt = 0
  private readonly node: string
  /** Transaction ids of the reports to senders this worker queues. */
  private readonly newTxid = createTxidGenerator()
  /** Where each group goes, and its attempt there. */
  private readonly destinations: Destinations
  /** TLS-RPT: the sessions counted, and the daily reports to the domains that ask for them. */
  readonly tlsReports: TlsReports

  constructor(private readonly deps: DeliveryDeps) {
    this.node = deps.node ?? deps.config.nodeName
    this.destinations = new Destinations(deps, { node: this.node, newTxid: this.newTxid, queued: () => this.kick() })
    this.tlsReports = this.destinations.tlsReports
  }

  /** Takes back the leases this node held before a restart, then starts working. */
  async start(): Promise<void> {
    const released = await this.deps.store.queue.release(this.node)
    if (released) this.deps.logger.info({ released }, 'took back deliveries leased before the restart')
    this.running = true
    this.loopDone = this.loop()
    this.destinations.start()
  }

  /** Why the worker is not delivering (not started, or stopped), or null while it is. */
  stopped(): string | null {
    return this.running ? null : 'delivery is stopped'
  }

  /** Looks at the queue now. */
  kick(): void {
    this.due = true
    this.wake?.()
  }

  /**
   * Queues an accepted message; resolves once it is committed. Unless the worker already holds
   * as much as one claim would lease, the message's recipients are leased in the same
   * transaction and wait in memory for a connection: no claim (a transaction and an fsync of its
   * own) and, for a small message, no read of its bytes. Otherwise the worker is woken to claim
   * it from the queue later.
   */
  async accept(message: NewMessage): Promise<{ rowId: number }> {
    if (!this.running || this.held() >= this.claimLimit()) {
      const queued = await this.deps.store.mail.enqueue(message)
      this.kick()
      return { rowId: queued.rowId }
    }
    const body = byteLength(message.raw) > BODY_IN_MEMORY_MAX ? undefined : joinPieces(message.raw)
    this.reserved++
    try {
      // The store is handed the joined bytes too, so that it does not join the pieces again.
      const { rowId, leased = [] } = await this.deps.store.mail.enqueue(body ? { ...message, raw: [body] } : message, {
        node: this.node,
        now: this.deps.clock(),
      })
      // Once stopping, the leases wait for the next start, which takes them back.
      if (this.running) {
        for (const items of groupItems(leased)) this.wait({ items, body })
        this.pump()
      }
      return { rowId }
    } finally {
      this.reserved--
    }
  }

  /** Groups delivering or waiting, and messages on their way in: what this worker holds leased. */
  private held(): number {
    return this.inFlight.size + this.waitingCount + this.reserved
  }

  /** Whether to claim more: only once little is left, so that leases do not age in memory. */
  private hasRoom(): boolean {
    return this.held() < this.deps.config.delivery.concurrency
  }

  /** The most rows one claim leases. */
  private claimLimit(): number {
    return this.deps.config.delivery.concurrency * 10
  }

  /**
   * Stops claiming, lets transactions in flight finish, closes connections, and hands back the
   * leases of the rows it had not started: any node takes them at once (a worker under a name of
   * its own, as `mailroom stdio`'s, would never start again to take them back).
   */
  async stop(): Promise<void> {
    this.running = false
    this.kick()
    await this.loopDone
    await Promise.all(this.inFlight)
    await Promise.all(this.recording)
    await this.destinations.stop()
    await this.deps.store.queue
      .release(this.node)
      .catch((err) => this.deps.logger.error({ err }, 'handing back the leases failed; they expire'))
  }

  private async loop(): Promise<void> {
    const { delivery } = this.deps.config
    while (this.running) {
      await this.renewLeases()
      let claimed = 0
      if (this.due && this.hasRoom()) {
        try {
          const limit = this.claimLimit()
          // Cleared first: a kick() while the claim is under way must not be lost.
          this.due = false
          const items = await this.deps.store.queue.claim({
            node: this.node,
            now: this.deps.clock(),
            leaseMs: this.deps.config.delivery.leaseTimeout,
            limit,
          })
          claimed = items.length
          if (claimed === limit) this.due = true
          for (const group of groupItems(items)) this.wait({ items: group })
          this.pump()
        } catch (err) {
          this.due = true
          this.deps.logger.error({ err }, 'claiming from the queue failed')
        }
      }
      if (claimed === 0 || this.active >= delivery.concurrency) await this.sleep(POLL_MS)
    }
  }

  /**
   * Every fifth of the lease timeout, the leases of the rows this worker holds (waiting for a connection, or in a
   * delivery to a slow host) are renewed: else after the timeout its own claim would take them again
   * and deliver them twice.
   */
  private async renewLeases(): Promise<void> {
    const now = this.deps.clock()
    if (now - this.renewedAt < this.deps.config.delivery.leaseTimeout * RENEW_SHARE) return
    try {
      await this.deps.store.queue.renew(this.node, now)
      this.renewedAt = now
    } catch (err) {
      this.deps.logger.error({ err }, 'renewing the leases failed')
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.due = true
        done()
      }, ms)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.wake = () => ((this.wake = null), done())
    })
  }

  private wait(group: Group): void {
    const domain = group.items[0].domain
    const queue = this.waiting.get(domain)
    if (queue) queue.push(group)
    else this.waiting.set(domain, [group])
    this.waitingCount++
  }

  /** Starts waiting groups, in order within each domain, while the global and per-domain limits allow. */
  private pump(): void {
    // Once stopping, nothing new starts: stop() hands the leases of what waits back to the queue.
    if (!this.running) return
    const { concurrency, domainConcurrency } = this.deps.config.delivery
    for (const [domain, queue] of this.waiting) {
      if (this.active >= concurrency) return
      while (queue.length > 0 && this.active < concurrency && (this.perDomain.get(domain) ?? 0) < domainConcurrency) {
        const group = queue.shift()!
        this.waitingCount--
        this.active++
        this.perDomain.set(domain, (this.perDomain.get(domain) ?? 0) + 1)
        let holding = true
        const release = () => {
          if (!holding) return
          holding = false
          this.active--
          this.perDomain.set(domain, this.perDomain.get(domain)! - 1)
          // Started now, the next delivery to this domain takes the connection just freed, and
          // its commands leave with the end of the message before it.
          this.pump()
          // A slot is free: claim more if the queue may have some.
          this.wake?.()
        }
        const task = this.deliverGroup(group, release)
          .catch((err) =>
            this.deps.logger.error({ err, txid: group.items[0].txid }, 'delivery attempt failed unexpectedly'),
          )
          .finally(() => {
            this.inFlight.delete(task)
            release()
          })
        this.inFlight.add(task)
      }
      if (queue.length === 0) this.waiting.delete(domain)
    }
  }

  /** One SMTP transaction for the recipients of one message at one domain. */
  private async deliverGroup({ items, body }: Group, sent: () => void): Promise<void> {
    const { store, logger, clock } = this.deps
    const { txid, messageRowId, envFrom, domain } = items[0]
    const bytes = body ? async () => body : () => store.queue.body(messageRowId)
    // Sandbox mail never leaves: no lookup, no connection; its replies are relay/sandbox.ts's,
    // recorded below like a destination's, reports and suppressions included. Mail to an inbox of
    // this mailroom goes straight into it (relay/inbound/local.ts), without a lookup either.
    const attempt: Attempt & { policy?: AppliedPolicy } = items[0].sandbox
      ? sandboxAttempt(items)
      : await this.destinations.attempt(domain, items, bytes, sent)
    const now = clock()
    const { retrySchedule, maxQueueAge } = this.deps.config.delivery
    const outcomes: AttemptOutcome[] = []
    const events: WebhookEvent[] = []
    for (const item of items) {
      const reply = attempt.replies.get(item.recipient) ?? { code: null, response: 'no reply for this recipient' }
      const verdict = classify(reply.code, reply.response)
      let state = verdict.state
      let next: number | null = null
      let response = cut(reply.response, MAX_STORED_RESPONSE)
      if (state === 'deferred') {
        next = nextAttempt(retrySchedule, item.attempts + 1, item.queuedAt, now, maxQueueAge)
        if (next === null) {
          state = 'failed'
          response = `${response} (gave up after ${item.attempts + 1} attempts)`
        }
      }
      const suppressed = Boolean(verdict.userUnknown && reply.toRcpt)
      if (suppressed) {
        // Suppress it: the next message to this mailbox is stopped before it hurts the sender.
        // Only on the reply to its own RCPT TO: a "user unknown" at MAIL FROM is about the sender.
        await store.blocks.addToList({
          accountId: item.accountId,
          source: 'internal',
          kind: 'recipient',
          address: item.recipient,
          reason: `an earlier message to it bounced: ${response}`,
          now,
          txid,
        })
      }
      this.deps.metrics?.delivery(state, item.queuedAt, now)
      outcomes.push({
        id: item.id,
        state,
        code: reply.code,
        response,
        mxHostname: attempt.mxHostname,
        mxAddress: attempt.mxAddress,
        tls: attempt.tls,
        tlsPolicy: attempt.policy?.mode ?? null,
        tlsPolicyDomain: attempt.policy?.domain ?? null,
        certValid: attempt.certValid ?? null,
        nextAttemptAt: next,
        time: now,
        suppressed,
      })
      events.push({
        id: newEventId(),
        type: `message.${state}`,
        accountId: item.accountId,
        time: now,
        row: item.id,
        data: {
          transactionId: txid,
          recipient: item.recipient,
          from: envFrom,
          subject: item.subject ?? null,
          messageId: item.messageId ?? null,
          code: reply.code,
          response,
          mxHost: attempt.mxHostname,
          attempt: item.attempts + 1,
          ...(state === 'failed' ? { suppressed } : {}),
        },
      })
      logger.info(
        {
          txid,
          row: item.id,
          rcpt: item.recipient,
          state,
          code: reply.code,
          mx: attempt.mxHostname,
          ...(item.sandbox ? { sandbox: true } : {}),
        },
        'delivery attempt',
      )
    }
    const reports = await this.reportsFor(items, outcomes, bytes, now)
    const recorded = store.queue
      .record(outcomes, reports, events)
      .then((queued) => {
        for (const report of queued) logger.info({ txid, report }, 'report to the sender queued')
        if (queued.length) this.kick()
      })
      .catch((err) =>
        logger.error(
          { err, txid },
          'recording delivery attempts failed; the rows are tried again once their lease expires',
        ),
      )
      .finally(() => this.recording.delete(recorded))
    this.recording.add(recorded)
  }

  /**
   * The reports to the sender that an attempt's outcomes call for. Should building them fail, the
   * outcomes are recorded all the same (the report is lost, and logged): trying the rows again
   * would deliver twice to the recipients that took the message.
   */
  private async reportsFor(
    items: QueueItem[],
    outcomes: AttemptOutcome[],
    body: () => Promise<Buffer | undefined>,
    now: number,
  ): Promise<SenderReport[]> {
    try {
      return await senderReports({ ...this.deps, newTxid: this.newTxid, body }, items, outcomes, now)
    } catch (err) {
      this.deps.logger.error({ err, txid: items[0].txid }, 'building the report to the sender failed; none is sent')
      return []
    }
  }
}

/** Leased rows grouped by message and domain, at most MAX_RCPTS_PER_TRANSACTION per group. */
export function groupItems(items: QueueItem[]): QueueItem[][] {
  const groups = new Map<string, QueueItem[]>()
  const out: QueueItem[][] = []
  for (const item of items) {
    const key = `${item.messageRowId}|${item.domain}`
    let group = groups.get(key)
    if (!group || group.length >= MAX_RCPTS_PER_TRANSACTION) {
      group = []
      groups.set(key, group)
      out.push(group)
    }
    group.push(item)
  }
  return out
}
