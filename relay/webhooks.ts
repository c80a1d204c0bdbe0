import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { OutboxItem, OutboxResult, Store } from '../storage/store.js'
import type { MxResolver } from './routes.js'
import { postWebhook } from './webhook-post.js'
import type { EngineMetrics } from '../metrics.js'

/** Events posted at once, whatever the number of endpoints: a slow one holds one slot, never delivery's. */
export const WEBHOOK_CONCURRENCY = 16
/**
 * Events posted at once for one account, and to one endpoint: the slow endpoints of one account
 * hold at most these of the slots, and the other accounts' events go on through the rest.
 */
export const WEBHOOK_ACCOUNT_CONCURRENCY = 4
export const WEBHOOK_ENDPOINT_CONCURRENCY = 2
/** An endpoint every attempt to which failed for this long is disabled. */
export const WEBHOOK_DISABLE_AFTER_MS = 5 * 86_400_000
/** How often the outbox is looked at when nothing wakes the worker. */
const POLL_MS = 1_000
/** How often the worker renews its leases, as a share of the lease timeout (as delivery does). */
const RENEW_SHARE = 1 / 5

export interface WebhookWorkerDeps {
  store: Store
  config: Pick<Config, 'webhooks' | 'delivery' | 'nodeName'>
  logger: Logger
  clock: () => number
  resolver: MxResolver
  /** The name its leases are held under; config.nodeName unless given. */
  node?: string
  /** Where each attempt's outcome is counted (GET /metrics). */
  metrics?: Pick<EngineMetrics, 'webhookDelivery'>
}

/**
 * The outcome of an attempt as the outbox records it: sent, or tried again after the schedule's
 * next wait (MAILROOM_WEBHOOK_RETRY_SCHEDULE), or dropped once the schedule is used up; the
 * endpoint is disabled once it has failed for WEBHOOK_DISABLE_AFTER_MS.
 */
export function outboxResult(item: OutboxItem, error: string | null, schedule: number[], now: number): OutboxResult {
  if (error === null) return { id: item.id, webhookId: item.webhookId, ok: true, nextAttemptAt: null, now }
  const wait = schedule[item.attempts]
  const failingSince = item.failingSince ?? now
  return {
    id: item.id,
    webhookId: item.webhookId,
    ok: false,
    error,
    nextAttemptAt: wait === undefined ? null : now + wait,
    disable: now - failingSince >= WEBHOOK_DISABLE_AFTER_MS,
    now,
  }
}

/**
 * The webhook worker: leases due events from the outbox (as the delivery worker leases
 * deliveries, so that nodes sharing a database never post one event twice at once) and posts
 * them, WEBHOOK_CONCURRENCY at a time (at most WEBHOOK_ACCOUNT_CONCURRENCY of one account and
 * WEBHOOK_ENDPOINT_CONCURRENCY to one endpoint), beside delivery and independent of it.
 */
export class WebhookWorker {
  private running = false
  private loopDone: Promise<void> = Promise.resolve()
  private wake: (() => void) | null = null
  private inFlight = new Set<Promise<void>>()
  /** Posts in flight by account and by webhook. */
  private perAccount = new Map<number, number>()
  private perEndpoint = new Map<number, number>()
  /** Rows claimed past a share, to hand back to the outbox. */
  private handBack: number[] = []
  private renewedAt = 0
  private readonly abort = new AbortController()
  private readonly node: string

  constructor(private readonly deps: WebhookWorkerDeps) {
    this.node = deps.node ?? deps.config.nodeName
  }

  async start(): Promise<void> {
    await this.deps.store.webhooks.release(this.node)
    this.running = true
    this.loopDone = this.loop()
  }

  /**
   * Stops claiming and cuts the posts under way (their events are posted again, with the same
   * webhook-id, after the next start or by another node), and hands back its leases.
   */
  async stop(): Promise<void> {
    this.running = false
    this.abort.abort()
    this.wake?.()
    await this.loopDone
    await Promise.all(this.inFlight)
    await this.deps.store.webhooks
      .release(this.node)
      .catch((err) => this.deps.logger.error({ err }, 'handing back the webhook leases failed; they expire'))
  }

  private async loop(): Promise<void> {
    const { store, clock, logger } = this.deps
    const leaseMs = this.deps.config.delivery.leaseTimeout
    while (this.running) {
      const now = clock()
      if (now - this.renewedAt >= leaseMs * RENEW_SHARE) {
        await store.webhooks
          .renew(this.node, now)
          .catch((err) => logger.error({ err }, 'renewing webhook leases failed'))
        this.renewedAt = now
      }
      const room = WEBHOOK_CONCURRENCY - this.inFlight.size
      let claimed = 0
      if (room > 0) {
        try {
          claimed = await this.claim(now, leaseMs, room)
        } catch (err) {
          logger.error({ err }, 'claiming webhook events failed')
        }
      }
      if (claimed === 0 || this.inFlight.size >= WEBHOOK_CONCURRENCY) await this.sleep(POLL_MS)
    }
  }

  /**
   * Leases up to `limit` due events of the accounts and endpoints below their share of the slots
   * and posts them; those a claim returned past a share are handed back at once, for a later turn.
   * Answers how many were posted.
   */
  private async claim(now: number, leaseMs: number, limit: number): Promise<number> {
    const { store } = this.deps
    const full = (counts: Map<number, number>, max: number) => [...counts].filter(([, n]) => n >= max).map(([k]) => k)
    const skip = {
      webhooks: full(this.perEndpoint, WEBHOOK_ENDPOINT_CONCURRENCY),
      accounts: full(this.perAccount, WEBHOOK_ACCOUNT_CONCURRENCY),
    }
    // Rows a failed hand-back left leased (and renewed) to this node go back first.
    await this.handBackRows()
    const items = await store.webhooks.claim({ node: this.node, now, leaseMs, limit, skip })
    for (const item of items) {
      if (
        (this.perEndpoint.get(item.webhookId) ?? 0) >= WEBHOOK_ENDPOINT_CONCURRENCY ||
        (this.perAccount.get(item.accountId) ?? 0) >= WEBHOOK_ACCOUNT_CONCURRENCY
      )
        this.handBack.push(item.id)
      else this.post(item)
    }
    const over = this.handBack.length
    await this.handBackRows()
    return items.length - over
  }

  /** Releases the rows claimed past a share; kept to try again should that fail. */
  private async handBackRows(): Promise<void> {
    if (this.handBack.length === 0) return
    await this.deps.store.webhooks.release(this.node, this.handBack)
    this.handBack = []
  }

  private post(item: OutboxItem): void {
    const { store, clock, logger, resolver, config } = this.deps
    count(this.perAccount, item.accountId, 1)
    count(this.perEndpoint, item.webhookId, 1)
    const task = (async () => {
      const error = await postWebhook(item, {
        resolver,
        allowPrivate: config.webhooks.allowPrivate,
        now: clock(),
        signal: this.abort.signal,
      })
      // Cut by stop(): neither sent nor failed; the lease is handed back.
      if (!this.running && error !== null) return
      const result = outboxResult(item, error, config.webhooks.retrySchedule, clock())
      this.deps.metrics?.webhookDelivery(error === null ? 'delivered' : 'failed')
      const about = { webhook: item.webhookId, event: item.eventId, type: item.type, attempt: item.attempts + 1 }
      if (error !== null) {
        if (result.nextAttemptAt === null)
          logger.warn({ ...about, error }, 'webhook event dropped: every attempt failed')
        else logger.info({ ...about, error }, 'webhook attempt failed; tried again later')
        if (result.disable) logger.warn({ webhook: item.webhookId, error }, 'webhook disabled: failing for 5 days')
      }
      await store.webhooks.record([result])
    })()
      .catch((err) => logger.error({ err, event: item.eventId }, 'recording a webhook attempt failed'))
      .finally(() => {
        this.inFlight.delete(task)
        count(this.perAccount, item.accountId, -1)
        count(this.perEndpoint, item.webhookId, -1)
        this.wake?.()
      })
    this.inFlight.add(task)
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.wake = () => ((this.wake = null), done())
    })
  }
}

/** Adds `by` to the count of `key`, forgetting it at zero. */
function count(counts: Map<number, number>, key: number, by: 1 | -1): void {
  const n = (counts.get(key) ?? 0) + by
  if (n > 0) counts.set(key, n)
  else counts.delete(key)
}
