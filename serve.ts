import { serve } from '@hono/node-server'
import type { Server } from 'node:http'
import type { AddressInfo, Server as NodeServer } from 'node:net'
import type { SMTPServer } from 'smtp-server'
import { ConfigError, type Config } from './config.js'
import { AUTH_FAILURE_WINDOW_MS } from './relay/auth-throttle.js'
import { startEngineThread } from './relay/engine.js'
import { deliveryTarget, HEARTBEAT_EXPIRY_MS, startHeartbeat } from './relay/heartbeat.js'
import { feedbackIntake } from './relay/inbound/feedback.js'
import { createMxServer } from './relay/inbound/mx.js'
import { authResolver, inboundIntake } from './relay/inbound/verify.js'
import { createSubmissionServer, submissionLimits } from './relay/submission.js'
import { startLocalSink } from './relay/sink.js'
import { loadTls, tlsCertFile } from './relay/tls.js'
import { bootstrap } from './accounts.js'
import { createLogger, logStream } from './logger.js'
import { createMetrics } from './metrics.js'
import { createServices } from './runtime.js'
import { openStore, storeName } from './storage/index.js'
import { DAY_MS } from './storage/store.js'
import { IDEMPOTENCY_WINDOW_MS } from './tools/idempotency.js'
import { HTTP_SERVE_OPTIONS, answerClientError, createHttpApp } from './transports/http.js'
import { MCP_SESSION_IDLE_MS } from './transports/mcp-http.js'
import { UNUSED_CLIENT_MS } from './transports/oauth.js'

/** How long a stop waits for deliveries in flight (a slow destination's reply) before it exits anyway. */
const SHUTDOWN_GRACE_MS = 30_000
/** How long past its expiry an MTA-STS policy is kept (the same 30 days TLS report claims are kept). */
const TLS_POLICY_KEPT_MS = 30 * DAY_MS

export interface RunningServer {
  httpPort: number
  smtpPort: number
  /** The implicit-TLS submission port, or null when MAILROOM_SMTPS_PORT is off. */
  smtpsPort: number | null
  /** The MX door's port, or null when MAILROOM_MX_LISTEN_PORT is off (or the store receives no mail). */
  mxPort: number | null
  /** What to show the operator on the first start of an empty data directory, once. */
  firstStart: string | null
  stop(): Promise<void>
}

/**
 * `mailroom serve`: the store (migrated on open), HTTP (REST, MCP, documents) and the SMTP
 * submission server over the one pipeline, and the relay engine (queue commits and the delivery
 * worker) in its own thread, with its own connection to the store.
 */
export async function startServer(configured: Config, options: { sink?: boolean } = {}): Promise<RunningServer> {
  if (options.sink && configured.delivery.smarthost)
    throw new ConfigError(
      '--sink and MAILROOM_SMARTHOST both say where mail goes: unset MAILROOM_SMARTHOST to keep mail in the sink, or start without --sink to send it to the smarthost',
    )
  // Kept to write the engine thread's lines through: stdout has one writer.
  const out = logStream(1)
  const logger = createLogger(configured, out)
  // With --sink, every message goes to a sink of this process, which prints it here (a trial).
  const sink = options.sink
    ? await startLocalSink({ host: '127.0.0.1', port: 0, write: (text) => out.write(text) })
    : null
  const config = sink
    ? { ...configured, delivery: { ...configured.delivery, smarthost: { host: '127.0.0.1', port: sink.port } } }
    : configured
  const store = await openStore(config)
  // Read before anything listens: a bad certificate stops the start with a message naming it.
  let tls: Awaited<ReturnType<typeof loadTls>>
  try {
    tls = await loadTls(config)
  } catch (err) {
    await store.close()
    throw err
  }

  // Said at every start, before the engine delivers anything: without a smarthost, mail is real.
  const mailTo = deliveryTarget(config.delivery, !!sink)
  if (config.delivery.smarthost) logger.info({ delivery: mailTo }, `mail goes to ${mailTo}`)
  else
    logger.warn(
      { delivery: mailTo },
      `mail goes to ${mailTo}: it leaves this machine. To keep it here, start with --sink (\`mailroom serve --sink\`, what npm start runs)`,
    )

  // The engine: accepted messages and spam-filter events are written by its thread (the pipeline's
  // intake), which delivers them too.
  // Counted in both threads, rendered by this one at GET /metrics.
  const metrics = createMetrics({ store, clock: Date.now, logger })
  const engine = await startEngineThread(
    config,
    out,
    (err) => {
      logger.fatal({ err }, 'the relay engine stopped; exiting')
      process.exit(1)
    },
    metrics,
  )
  const rt = createServices(store, config, { logger, intake: engine, metrics })

  // Hourly housekeeping: spam-filter events are kept past their windows, then pruned, and
  // idempotency keys and counts of wrong keys past theirs swept, and expired OAuth codes and tokens
  // (and registered clients never granted anything), and idle MCP sessions, and received messages
  // past MAILROOM_INBOUND_RETENTION, and MTA-STS policies long expired, so that no table grows without
  // end; the database refreshes its statistics.
  const prune = () =>
    store.blocks
      .prune(rt.clock() - config.blockEventRetention)
      .then((n) => n && logger.info({ pruned: n }, 'old spam-filter events pruned'))
      .then(() => store.idempotency.sweep(rt.clock() - IDEMPOTENCY_WINDOW_MS))
      .then((n) => n && logger.info({ swept: n }, 'expired idempotency keys swept'))
      .then(() => store.oauth.sweep(rt.clock(), rt.clock() - UNUSED_CLIENT_MS))
      .then((n) => n && logger.info({ swept: n }, 'expired OAuth codes, tokens and unused clients swept'))
      .then(() => store.mcpSessions.sweep(rt.clock() - MCP_SESSION_IDLE_MS))
      .then((n) => n && logger.info({ swept: n }, 'idle MCP sessions swept'))
      .then(() => store.authFailures.sweep(rt.clock() - AUTH_FAILURE_WINDOW_MS))
      .then((n) => n && logger.info({ swept: n }, 'counts of wrong keys whose window passed swept'))
      .then(() => store.servers.sweep(rt.clock() - HEARTBEAT_EXPIRY_MS))
      .then((n) => n && logger.info({ swept: n }, 'heartbeats of servers gone without a word swept'))
      .then(() => store.inbound.expireInbound(rt.clock() - config.inbound.retention))
      .then((n) => n && logger.info({ expired: n }, 'received messages past MAILROOM_INBOUND_RETENTION deleted'))
      // MTA-STS policies expired a month ago (and old TLS-RPT claims), whether or not TLS reports are sent.
      .then(() => store.tlsPolicy.prune(rt.clock() - TLS_POLICY_KEPT_MS))
      .then((n) => n && logger.info({ pruned: n }, 'expired MTA-STS policies and old TLS report claims pruned'))
      // A send policy's counters are read for the current UTC hour and day only.
      .then(() => store.sendCounts.sweep(rt.clock() - 2 * DAY_MS))
      .then((n) => n && logger.info({ swept: n }, 'send counters of past days swept'))
      .then(() => store.maintain())
      .catch((err) => logger.error({ err }, 'housekeeping failed'))
  await prune()
  const pruning = setInterval(prune, 3_600_000)
  pruning.unref()

  // Held messages not decided within MAILROOM_APPROVAL_TTL are rejected, within a minute of it. Any
  // node may do it: a hold is decided once (store.holds), whichever node gets there first.
  const expireHolds = () =>
    store.holds
      .expire(rt.clock())
      .then((n) => n && logger.info({ rejected: n }, 'held messages past MAILROOM_APPROVAL_TTL rejected'))
      .catch((err) => logger.error({ err }, 'rejecting expired held messages failed'))
  const expiring = setInterval(expireHolds, 60_000)
  expiring.unref()

  // HTTP listens before the app is made, so that on port 0 the documents can name the port it got.
  let app: ReturnType<typeof createHttpApp> | undefined
  const http = serve({
    fetch: (req, env) => app?.fetch(req, env) ?? new Response(null, { status: 503 }),
    hostname: config.http.host,
    port: config.http.port,
    ...HTTP_SERVE_OPTIONS,
  })
  http.on('clientError', answerClientError)
  await listening(
    http,
    () => undefined,
    'MAILROOM_HTTP_HOST, MAILROOM_HTTP_PORT',
    `${config.http.host}:${config.http.port}`,
  )
  const httpPort = (http.address() as AddressInfo).port
  const publicUrl =
    config.http.port === 0 && config.publicUrl === 'http://localhost:0'
      ? `http://localhost:${httpPort}`
      : config.publicUrl
  // From now on a `mailroom stdio` on this database leaves delivery to this server.
  const heartbeat = await startHeartbeat(rt, { node: config.nodeName, url: publicUrl, delivery: mailTo })

  // One count of connections and AUTH failures per client across both submission ports.
  const submission = { ...rt, tls, limits: submissionLimits(config), metrics }
  /** Starts a submission server on `port` of MAILROOM_SMTP_HOST; resolves with the port it got. */
  const listenSubmission = async (server: SMTPServer, port: number, setting: string) => {
    const { host } = config.smtp
    await listening(server.server, () => server.listen(port, host), `MAILROOM_SMTP_HOST, ${setting}`, `${host}:${port}`)
    return (server.server.address() as AddressInfo).port
  }
  const smtp = createSubmissionServer(submission)
  const smtpPort = await listenSubmission(smtp, config.smtp.port, 'MAILROOM_SMTP_PORT')
  const { securePort } = config.smtp
  const smtps = securePort === null ? null : createSubmissionServer(submission, { secure: true })
  const smtpsPort = smtps ? await listenSubmission(smtps, securePort!, 'MAILROOM_SMTPS_PORT') : null

  // The MX door: mail from the internet for the receiving domains, into the store's inbound half.
  // Recipients are looked up and a message is checked (SPF, DKIM, DMARC) here; it is then parsed
  // and committed by the engine thread, in its group commit, so that the commit of one message
  // overlaps the checks of the next and neither the parse nor the fsync takes turns with the doors.
  const mx =
    config.mx.port === null
      ? null
      : createMxServer({
          inbound: { recipient: (address, quota) => store.inbound.recipient(address, quota) },
          intake: inboundIntake(
            { resolver: authResolver(config.delivery.dnsServers), hostname: config.inbound.mxHostname, logger },
            engine.storeChecked,
          ),
          config,
          hostname: config.inbound.mxHostname,
          quota: config.inbound.quota,
          logger,
          tls,
          budget: rt.budget,
          metrics,
          returnPaths: config.inbound.returnPath
            ? {
                label: config.inbound.returnPath,
                open: (local, domain) => store.queue.openReturnPathToken(local, domain),
                intake: feedbackIntake({ store, clock: rt.clock, logger }),
              }
            : undefined,
        })
  const mxPort = mx
    ? await (async () => {
        const { host, port } = config.mx
        await listening(
          mx.server,
          () => mx.listen(port!, host),
          'MAILROOM_MX_LISTEN_HOST, MAILROOM_MX_LISTEN_PORT',
          `${host}:${port}`,
        )
        return (mx.server.address() as AddressInfo).port
      })()
    : null

  let stopping = false
  const delivery = () => (stopping ? 'shutting down' : engine.stopped())
  // Made once everything listens, so that on port 0 the documents and the console name the ports
  // HTTP and SMTP got.
  const listens = { ...config, publicUrl, smtp: { ...config.smtp, port: smtpPort, securePort: smtpsPort } }
  app = createHttpApp({ ...rt, config: listens }, { delivery, metrics })

  logger.info(
    {
      host: config.http.host,
      port: httpPort,
      smtpHost: config.smtp.host,
      smtpPort,
      smtpsPort,
      mxHost: config.mx.host,
      mxPort,
      store: storeName(config),
      delivery: mailTo,
    },
    'HTTP and SMTP listening',
  )

  // The first start's account only once everything is up: a start that fails creates none, so
  // that its API key, shown only here, is never lost.
  const first = await bootstrap(rt)
  const firstStart = first
    ? [
        '',
        'mailroom: first start. Created an account with one mail order:',
        `  API key (shown only now): ${first.apiKey}`,
        `  SMTP username:            mb${first.order.id}`,
        `  SMTP password:            ${first.password}`,
        `  SMTP submission:          ${config.smtp.host}:${smtpPort} (STARTTLS, AUTH PLAIN or LOGIN)`,
        ...(smtpsPort === null
          ? []
          : [
              `  SMTP submission over TLS: ${config.smtp.host}:${smtpsPort} (implicit TLS; certificate ${tlsCertFile(config)})`,
            ]),
        ...mailGoesTo(config, !!sink),
        `  Try it:                   curl -H 'X-API-KEY: ${first.apiKey}' ${publicUrl}/mail`,
        '',
      ].join('\n')
    : null

  return {
    httpPort,
    smtpPort,
    smtpsPort,
    mxPort,
    firstStart,
    async stop() {
      logger.info('shutting down')
      stopping = true
      clearInterval(pruning)
      clearInterval(expiring)
      const closed = (server: { close(cb: () => void): unknown }) =>
        new Promise<void>((resolve) => void server.close(() => resolve()))
      // Stop taking work first, then let deliveries in flight finish, for up to SHUTDOWN_GRACE_MS.
      // A keep-alive connection whose request was still being answered at the close becomes idle
      // afterwards, and would hold the stop for the whole keep-alive timeout: idle ones are closed
      // as they come.
      const sweep = setInterval(() => (http as Server).closeIdleConnections(), 100)
      const httpClosed = closed(http).finally(() => clearInterval(sweep))
      const drained = Promise.all([
        closed(smtp),
        ...(smtps ? [closed(smtps)] : []),
        ...(mx ? [closed(mx)] : []),
        httpClosed,
        app.close(),
      ]).then(() => engine.stop())
      const finished = await Promise.race([
        drained.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), SHUTDOWN_GRACE_MS).unref()),
      ])
      if (!finished)
        logger.warn(
          `deliveries still under way after ${SHUTDOWN_GRACE_MS / 1000} s were cut off: they are tried again at the next start, and may arrive twice`,
        )
      // Delivery is over: a `mailroom stdio` on this database may deliver from now on.
      await heartbeat.stop()
      await sink?.close()
      await store.close()
      // The last lines out before the process exits, through the ordinary (asynchronous) writes:
      // a stdout whose reader is gone fails them with EPIPE, after which the logger drops lines.
      // Left to the synchronous flush at exit, that EPIPE would be retried forever.
      await new Promise<void>((resolve) => {
        setTimeout(resolve, 2000).unref()
        logger.flush(() => resolve())
      })
    },
  }
}

/** Resolves once `server` listens (`listen` starts it, unless it already did); a failure names the settings behind it. */
function listening(server: NodeServer, listen: () => void, settings: string, address: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', (err) => reject(new ConfigError(`cannot listen on ${address} (${settings}): ${err.message}`)))
    listen()
  })
}

/** Where accepted mail goes, for the first-start banner: with real mail, how to keep it here instead. */
function mailGoesTo(config: Config, sink: boolean): string[] {
  const { smarthost } = config.delivery
  const goesTo = '  Mail goes to:             '
  const more = '                            '
  if (sink)
    return [
      `${goesTo}the sink of mailroom serve --sink at ${smarthost!.host}:${smarthost!.port}, which prints each message:`,
      `${more}none leaves this machine. Real delivery: docs/relay.md, "Sending real mail"`,
    ]
  if (smarthost) return [`${goesTo}${deliveryTarget(config.delivery)}`]
  return [
    `${goesTo}the recipients' MX hosts, found by DNS: real mail. To keep it on this machine,`,
    `${more}start with --sink (\`mailroom serve --sink\`, what npm start runs)`,
  ]
}
