import { serve } from '@hono/node-server'
import type { AddressInfo } from 'node:net'
import type { Config } from './config.js'
import { DeliveryWorker } from './relay/delivery.js'
import { startEngineThread } from './relay/engine.js'
import { createResolver, type MxResolver } from './relay/routes.js'
import { createSubmissionServer } from './relay/submission.js'
import { loadTls } from './relay/tls.js'
import { bootstrap, createLogger, openRuntime } from './runtime.js'
import { createHttpApp } from './transports/http.js'

export interface RunningServer {
  httpPort: number
  smtpPort: number
  /** What to show the operator on the first start of an empty data directory, once. */
  firstStart: string | null
  stop(): Promise<void>
}

export interface ServeOptions {
  /** Where the engine runs: its own worker thread (the default), or this event loop. */
  engine?: 'thread' | 'in-process'
  /** MX lookups of the in-process engine (the thread always uses DNS). */
  resolver?: MxResolver
}

/**
 * `mailroom serve`: the data directory (migrated on open), HTTP (REST, MCP, documents) and the
 * SMTP submission server over the one pipeline, and the engine (queue commits and the delivery
 * worker) in its own thread.
 */
export async function startServer(config: Config, options: ServeOptions = {}): Promise<RunningServer> {
  const logger = createLogger(config)
  const rt = openRuntime(config, { logger })
  const first = await bootstrap(rt)

  // Hourly housekeeping: spam-filter events are kept past their windows, then pruned, so the
  // table does not grow without end; the database refreshes its statistics.
  const prune = () =>
    rt.store.blocks
      .prune(rt.clock() - config.blockEventRetention)
      .then((n) => n && logger.info({ pruned: n }, 'old spam-filter events pruned'))
      .then(() => rt.store.maintain())
      .catch((err) => logger.error({ err }, 'housekeeping failed'))
  await prune()
  const pruning = setInterval(prune, 3_600_000)
  pruning.unref()

  // The engine (queue commits and delivery) runs in its own thread; in process when asked (the
  // in-process tests, which run from TypeScript sources that a worker thread cannot load).
  let engine: { stop(): Promise<void> }
  if (options.engine === 'in-process') {
    const worker = new DeliveryWorker({ ...rt, resolver: options.resolver ?? createResolver(config.delivery.dnsServers) })
    // Accepted messages go through the worker, which starts them at once when it has room.
    rt.store.mail.enqueue = (message) => worker.accept(message)
    await worker.start()
    engine = worker
  } else {
    const thread = await startEngineThread(config, logger, (err) => {
      logger.fatal({ err }, 'the relay engine stopped; exiting')
      process.exit(1)
    })
    // Accepted messages are committed by the engine thread: the pipeline's store hands them over.
    rt.store.mail.enqueue = thread.enqueue
    engine = thread
  }

  const app = createHttpApp(rt)
  const http = serve({ fetch: app.fetch, hostname: config.http.host, port: config.http.port })
  await new Promise<void>((resolve, reject) => http.once('listening', resolve).once('error', reject))
  const httpPort = (http.address() as AddressInfo).port

  const smtp = createSubmissionServer({ ...rt, tls: await loadTls(config) })
  await new Promise<void>((resolve, reject) => {
    smtp.server.once('error', reject)
    smtp.listen(config.smtp.port, config.smtp.host, () => resolve())
  })
  const smtpPort = (smtp.server.address() as AddressInfo).port
  logger.info({ host: config.http.host, port: httpPort, smtpHost: config.smtp.host, smtpPort, dataDir: config.dataDir }, 'HTTP and SMTP listening')

  const base = config.http.port === 0 ? `http://${config.http.host}:${httpPort}` : config.publicUrl
  const firstStart = first
    ? [
        '',
        'mailroom: first start. Created an account with one mail order:',
        `  API key (shown only now): ${first.apiKey}`,
        `  SMTP username:            mb${first.order.id}`,
        `  SMTP password:            ${first.password}`,
        `  SMTP submission:          ${config.smtp.host}:${smtpPort} (STARTTLS, AUTH PLAIN or LOGIN)`,
        `  Try it:                   curl -H 'X-API-KEY: ${first.apiKey}' ${base}/mail`,
        '',
      ].join('\n')
    : null

  return {
    httpPort,
    smtpPort,
    firstStart,
    async stop() {
      logger.info('shutting down')
      clearInterval(pruning)
      const closed = (server: { close(cb: () => void): unknown }) => new Promise<void>((resolve) => void server.close(() => resolve()))
      // Stop taking work first, then let deliveries in flight finish.
      const drained = Promise.all([closed(smtp), closed(http), app.close()]).then(() => engine.stop())
      await Promise.race([drained, new Promise((r) => setTimeout(r, 5000).unref())])
      await rt.close()
    },
  }
}
