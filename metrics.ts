import type { Logger } from 'pino'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import { MX_REFUSAL_REASONS, type MxRefusalReason, REFUSAL_REASONS, type RefusalReason } from './relay/refusal.js'
import type { AttemptOutcome, Store } from './storage/store.js'

/** Where a message came in: REST and MCP (`api`; the tools do not know which) or SMTP submission. */
export type Door = 'api' | 'smtp'
const DOORS: Door[] = ['api', 'smtp']
export type DeliveryResult = AttemptOutcome['state']
const DELIVERY_RESULTS: DeliveryResult[] = ['delivered', 'deferred', 'failed']
/** What became of one attempt to deliver a webhook event. */
export type WebhookResult = 'delivered' | 'failed'
const WEBHOOK_RESULTS: WebhookResult[] = ['delivered', 'failed']

/**
 * Upper bounds (seconds) of the delivery latency histogram: most mail goes out within seconds,
 * and a deferred recipient waits out the retry schedule, up to MAILROOM_MAX_QUEUE_AGE (48 h).
 */
export const DELIVERY_LATENCY_BUCKETS = [
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  300,
  900,
  1800,
  3600,
  4 * 3600,
  12 * 3600,
  24 * 3600,
  48 * 3600,
]

/**
 * What is counted where deliveries happen: in `mailroom serve` the relay engine's thread, whose
 * calls are replayed on the main thread's metrics (forwardedMetrics, Metrics.replay).
 */
export interface EngineMetrics {
  /** The outcome of one delivery attempt for one recipient whose message was accepted at `acceptedAt` (ms). */
  delivery(result: DeliveryResult, acceptedAt: number, now: number): void
  /** The outcome of one attempt to deliver a webhook event. */
  webhookDelivery(result: WebhookResult): void
}

/** A call to EngineMetrics as it travels between threads: the method's name, then its arguments. */
export type EngineCall = {
  [K in keyof EngineMetrics]: [K, ...Parameters<EngineMetrics[K]>]
}[keyof EngineMetrics]

/** The process's metrics, in the Prometheus text format at GET /metrics (transports/metrics.ts). */
export interface Metrics extends EngineMetrics {
  /** A message accepted (committed to the queue). */
  accepted(door: Door): void
  /** A message refused by the relay's checks (over SMTP, also one recipient refused at RCPT TO). */
  refused(door: Door, reason: RefusalReason): void
  /** A message the MX door acknowledged: committed for every inbox it is for. */
  received(): void
  /** A connection, recipient or message the MX door refused. */
  mxRefused(reason: MxRefusalReason): void
  smtpSessionOpened(): void
  smtpSessionClosed(): void
  /** An HTTP request answered; `route` is the pattern it matched (`/mail/{id}`), never the path. */
  httpRequest(method: string, route: string, status: number): void
  /** Applies calls made in another thread (forwardedMetrics). */
  replay(calls: EngineCall[]): void
  /** Every metric, the queue's read from the store now. */
  render(): Promise<{ contentType: string; body: string }>
}

/**
 * The metrics of one `mailroom serve`, in a registry of their own (never prom-client's global
 * one), with the process's (CPU, memory, event loop, garbage collection) unless `process` is
 * false. The queue's depth and age are read from `store` at each scrape.
 */
export function createMetrics(deps: {
  store: Pick<Store, 'queue'>
  clock: () => number
  logger: Logger
  process?: boolean
}): Metrics {
  const registry = new Registry()
  if (deps.process ?? true) collectDefaultMetrics({ register: registry })
  const registers = [registry]

  const accepted = new Counter({
    name: 'mailroom_messages_accepted_total',
    help: 'Messages accepted: committed to the queue, by the door they came in by',
    labelNames: ['door'] as const,
    registers,
  })
  const refused = new Counter({
    name: 'mailroom_messages_refused_total',
    help: "Messages refused by the relay's checks (over SMTP, also each recipient refused at RCPT TO), by door and reason",
    labelNames: ['door', 'reason'] as const,
    registers,
  })
  const received = new Counter({
    name: 'mailroom_mx_messages_received_total',
    help: 'Messages the MX door received: committed for every inbox they are for, the sender told so',
    registers,
  })
  const mxRefused = new Counter({
    name: 'mailroom_mx_refused_total',
    help: 'Connections, recipients and messages the MX door refused, by reason',
    labelNames: ['reason'] as const,
    registers,
  })
  const deliveries = new Counter({
    name: 'mailroom_deliveries_total',
    help: 'Delivery attempts, one per recipient per attempt, by result: delivered, deferred (to be tried again) or failed',
    labelNames: ['result'] as const,
    registers,
  })
  const latency = new Histogram({
    name: 'mailroom_delivery_latency_seconds',
    help: 'Time from the acceptance of a message to its delivery, per recipient delivered',
    buckets: DELIVERY_LATENCY_BUCKETS,
    registers,
  })
  const queueDepth = new Gauge({
    name: 'mailroom_queue_depth',
    help: 'Recipients still to deliver (queued, deferred or in flight), in the whole queue',
    registers,
  })
  const oldestAge = new Gauge({
    name: 'mailroom_queue_oldest_age_seconds',
    help: 'Age of the oldest message with a recipient still to deliver; 0 when none waits',
    registers,
  })
  const smtpSessions = new Gauge({
    name: 'mailroom_smtp_sessions_open',
    help: 'SMTP submission sessions open, on both submission ports',
    registers,
  })
  const httpRequests = new Counter({
    name: 'mailroom_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  })
  const webhooks = new Counter({
    name: 'mailroom_webhook_deliveries_total',
    help: 'Attempts to deliver a webhook event, by result: delivered (a 2xx answer) or failed',
    labelNames: ['result'] as const,
    registers,
  })
  // Every series a label set can have is there from the start, at 0: a rate over a series that
  // appears only at its first event misses that event.
  for (const door of DOORS) {
    accepted.inc({ door }, 0)
    for (const reason of Object.keys(REFUSAL_REASONS)) refused.inc({ door, reason }, 0)
  }
  received.inc(0)
  for (const reason of Object.keys(MX_REFUSAL_REASONS)) mxRefused.inc({ reason }, 0)
  for (const result of DELIVERY_RESULTS) deliveries.inc({ result }, 0)
  for (const result of WEBHOOK_RESULTS) webhooks.inc({ result }, 0)

  const metrics: Metrics = {
    accepted: (door) => accepted.inc({ door }),
    refused: (door, reason) => refused.inc({ door, reason }),
    received: () => received.inc(),
    mxRefused: (reason) => mxRefused.inc({ reason }),
    delivery(result, acceptedAt, now) {
      deliveries.inc({ result })
      if (result === 'delivered') latency.observe(Math.max(0, now - acceptedAt) / 1000)
    },
    webhookDelivery: (result) => webhooks.inc({ result }),
    smtpSessionOpened: () => smtpSessions.inc(),
    smtpSessionClosed: () => smtpSessions.dec(),
    httpRequest: (method, route, status) => httpRequests.inc({ method, route, status }),
    replay(calls) {
      for (const [method, ...args] of calls) (metrics[method] as (...a: unknown[]) => void)(...args)
    },
    async render() {
      try {
        const { recipients, oldestQueuedAt } = await deps.store.queue.depth()
        queueDepth.set(recipients)
        oldestAge.set(oldestQueuedAt === null ? 0 : Math.max(0, deps.clock() - oldestQueuedAt) / 1000)
      } catch (err) {
        // The rest is still worth having while the database does not answer: these say they are unknown.
        deps.logger.error({ err }, 'metrics: reading the queue failed')
        queueDepth.set(Number.NaN)
        oldestAge.set(Number.NaN)
      }
      return { contentType: registry.contentType, body: await registry.metrics() }
    },
  }
  return metrics
}

/** EngineMetrics whose calls are handed to `send`, to be replayed on the metrics of another thread. */
export function forwardedMetrics(send: (call: EngineCall) => void): EngineMetrics {
  return {
    delivery: (...args) => send(['delivery', ...args]),
    webhookDelivery: (...args) => send(['webhookDelivery', ...args]),
  }
}
