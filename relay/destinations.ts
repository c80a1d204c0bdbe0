import type { QueueItem } from '../storage/store.js'
import type { DeliveryDeps } from './delivery.js'
import { localAttempt } from './inbound/local.js'
import { type AppliedPolicy, StsPolicies } from './mta-sts.js'
import { outboundContext } from './mx-certificate.js'
import { MxClient, type Attempt } from './mx-client.js'
import { attemptEach, ReturnPaths } from './return-path.js'
import { resolveRoute, type Route } from './routes.js'
import { sameReply } from './smtp-session.js'
import { TlsReports } from './tls-reports.js'

/** Successful MX lookups are reused this long. */
const ROUTE_TTL_MS = 60_000

/**
 * Where a group of recipients goes, and its attempt there: an inbox of this mailroom straight in,
 * else the domain's route (its MX hosts, kept a minute), its MTA-STS policy and the SMTP
 * transaction on a host the policy allows, one per recipient when the sender's domain has a return
 * path. The delivery worker (delivery.ts) decides what and when; this, where and how.
 */
export class Destinations {
  private routes = new Map<string, { route: Route; expires: number }>()
  private readonly mx: MxClient
  private readonly returnPaths: ReturnPaths
  /** The recipient domains' MTA-STS policies (none through a smarthost: it is no domain's MX). */
  private readonly policies: StsPolicies | null
  /** TLS-RPT: the sessions counted, and the daily reports to the domains that ask for them. */
  readonly tlsReports: TlsReports

  constructor(
    private readonly deps: DeliveryDeps,
    worker: { node: string; newTxid: () => string; queued: () => void },
  ) {
    const { config } = deps
    const secureContext = outboundContext(config.delivery.outboundCa)
    this.mx = new MxClient({ heloName: config.nodeName, timeout: config.delivery.timeout, secureContext })
    this.returnPaths = new ReturnPaths({ store: deps.store, label: config.inbound.returnPath, clock: deps.clock })
    this.tlsReports = new TlsReports({ ...deps, ...worker })
    this.policies = config.delivery.smarthost
      ? null
      : new StsPolicies({
          ...deps,
          allowPrivate: config.webhooks.allowPrivate,
          secureContext,
          port: deps.policyPort,
          failed: (domain, resultType, mxHost) => this.tlsReports.count(domain, 'sts', resultType, mxHost),
        })
  }

  start(): void {
    this.tlsReports.start()
  }

  /** Writes the TLS-RPT counts, and closes the connections kept open. */
  async stop(): Promise<void> {
    await this.tlsReports.stop()
    this.mx.close()
  }

  /**
   * The attempt of a group at `domain`: mail to an inbox of this mailroom goes straight into it
   * (relay/inbound/local.ts), without a lookup; any other, to the domain's hosts.
   */
  async attempt(
    domain: string,
    items: QueueItem[],
    bytes: () => Promise<Buffer | undefined>,
    sent: () => void,
  ): Promise<Attempt & { policy?: AppliedPolicy }> {
    return (await this.local(items, bytes)) ?? (await this.remote(domain, items, bytes, sent))
  }

  private async route(domain: string): Promise<Route> {
    const now = this.deps.clock()
    const cached = this.routes.get(domain)
    if (cached && cached.expires > now) return cached.route
    const { mxPort, smarthost, allowPrivateMx } = this.deps.config.delivery
    const route = await resolveRoute(this.deps.resolver, domain, { mxPort, smarthost, allowPrivateMx })
    if ('hosts' in route) this.routes.set(domain, { route, expires: now + ROUTE_TTL_MS })
    return route
  }

  /** The attempt of recipients at a receiving domain of this mailroom, or undefined for any other domain. */
  private local(items: QueueItem[], bytes: () => Promise<Buffer | undefined>): Promise<Attempt | undefined> {
    const { store, config, logger, clock } = this.deps
    return localAttempt(
      {
        inbound: store.inbound,
        quota: config.inbound.quota,
        hostname: config.inbound.mxHostname ?? config.nodeName,
        logger,
        clock,
      },
      items,
      bytes,
    )
  }

  /**
   * The SMTP transaction of a group at its destination, or with a return path of the sender's
   * domain (MAILROOM_RETURN_PATH) one per recipient, each with its own: the bytes read once for all.
   */
  private async remote(
    domain: string,
    items: QueueItem[],
    bytes: () => Promise<Buffer | undefined>,
    sent: () => void,
  ): Promise<Attempt & { policy?: AppliedPolicy }> {
    const returnDomain = await this.returnPaths.domainOf(items[0])
    const to = items.map((i) => i.recipient)
    if (!returnDomain) return this.send(domain, { from: items[0].envFrom, to }, bytes, sent)
    let read: Promise<Buffer | undefined> | undefined
    const once = () => (read ??= bytes())
    return attemptEach(
      items,
      (item) => this.returnPaths.address(item.id, returnDomain),
      (envelope, done) => this.send(domain, envelope, once, done),
      sent,
    )
  }

  /**
   * An attempt at the destination: the domain's route and its MTA-STS policy (RFC 8461 §5: looked
   * up before each delivery), then an SMTP transaction on a host the policy allows.
   */
  private async send(
    domain: string,
    envelope: { from: string; to: string[] },
    bytes: () => Promise<Buffer | undefined>,
    sent: () => void,
  ): Promise<Attempt & { policy?: AppliedPolicy }> {
    const noConnection = (code: number, response: string) => ({
      mxHostname: null,
      mxAddress: null,
      tls: null,
      replies: sameReply(envelope.to, { code, response }),
    })
    const route = await this.route(domain)
    if ('error' in route) return noConnection(route.error.code, route.error.response)
    if (!this.policies) return this.mx.deliver(route.hosts, envelope, bytes, sent)
    const plan = await this.policies.plan(domain, route.hosts)
    if ('refusal' in plan) return { ...noConnection(451, plan.refusal), policy: plan.policy }
    const attempt = await this.mx.deliver(plan.hosts, envelope, bytes, sent, plan.policy)
    // RFC 8460 §4.3: a session with a host the policy does not list failed validation, TLS or not.
    for (const s of attempt.sessions ?? [])
      this.tlsReports.count(
        domain,
        'sts',
        plan.unlisted.includes(s.mxHost) ? 'validation-failure' : s.resultType,
        s.mxHost,
      )
    return { ...attempt, policy: plan.policy }
  }
}
