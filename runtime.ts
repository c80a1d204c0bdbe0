import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pino, type Logger } from 'pino'
import { ConfigError, type Config } from './config.js'
import { createRelay } from './relay/pipeline.js'
import { DB_FILE, openDataDir } from './storage/sqlite.js'
import type { Account, MailOrder, Store } from './storage/store.js'
import type { Services } from './tools/define.js'

export interface Runtime extends Services {
  close(): Promise<void>
}

/**
 * Logs go to stderr when stdout is reserved (stdio MCP, --json output), one synchronous write per
 * line; else to stdout, in batches of 4 KB or what 100 ms brought, and what is left at exit.
 * (Writing each line as soon as the write before it was done took about 5% of the main thread
 * under the load of a send benchmark: a write, and the thread-pool round trip, per line or two.)
 * A stream given instead takes the lines: the engine thread hands its lines over to the main
 * thread's logger, the one writer of stdout.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination: 1 | 2 | { write(line: string): void } = 1): Logger {
  const stream = typeof destination === 'number' ? pino.destination(destination === 2 ? { fd: 2, sync: true } : { fd: 1, sync: false, minLength: 4096, periodicFlush: 100 }) : destination
  return pino({ level: config.logLevel, base: { pid: process.pid } }, stream)
}

/** Writes lines that are already formatted (the engine thread's) through the logger's destination. */
export function writeLogLines(logger: Logger, lines: string): void {
  ;(logger as unknown as Record<symbol, { write(text: string): void }>)[pino.symbols.streamSym].write(lines)
}

/** Wires the services around a store. */
export function createServices(store: Store, config: Config, options: { logger: Logger; clock?: () => number }): Services {
  const clock = options.clock ?? Date.now
  const relay = createRelay({ store, config, logger: options.logger, clock })
  return { store, relay, config, logger: options.logger, clock }
}

/**
 * Opens the data directory (creating and migrating the database) and wires the services. With
 * `existing`, a directory without a database is refused rather than created (an admin command
 * pointed at the wrong place must not answer from a new, empty one).
 */
export function openRuntime(config: Config, options: { logger: Logger; clock?: () => number; existing?: boolean }): Runtime {
  if (options.existing && !existsSync(join(config.dataDir, DB_FILE))) {
    throw new ConfigError(`no mailroom database in ${config.dataDir} (MAILROOM_DATA_DIR): point it at the data directory of \`mailroom serve\`, which creates one on its first start`)
  }
  let store: ReturnType<typeof openDataDir>
  try {
    store = openDataDir(config.dataDir)
  } catch (err) {
    throw new ConfigError(`cannot open the data directory ${config.dataDir} (MAILROOM_DATA_DIR): ${(err as Error).message}`)
  }
  return { ...createServices(store, config, options), close: () => store.close() }
}

/** A new account with one API key; the key is returned in full only here. */
export async function createAccount(services: Services, name: string): Promise<{ account: Account; apiKey: string }> {
  const now = services.clock()
  const { pricing } = services.config
  const account = await services.store.accounts.create({
    name,
    currency: pricing.currency,
    priceBase: pricing.base,
    pricePerMessage: pricing.perMessage,
    // Cycles start on the day the account was made; days past the 28th would skip short months.
    billingDay: Math.min(new Date(now).getUTCDate(), 28),
    createdAt: now,
  })
  const { key } = await services.store.apiKeys.create(account.id, now)
  return { account, apiKey: key }
}

export async function createOrder(services: Services, accountId: number, comment: string | null, senders: string[]): Promise<{ order: MailOrder; password: string }> {
  return services.store.orders.create({ accountId, comment, senders, now: services.clock() })
}

/**
 * On the first start with an empty database: an account with one active mail order, so the
 * service can be used at once. Returns what must be shown to the operator, once.
 */
export async function bootstrap(services: Services): Promise<{ apiKey: string; order: MailOrder; password: string } | null> {
  if ((await services.store.accounts.list()).length > 0) return null
  const { account, apiKey } = await createAccount(services, 'default')
  const { order, password } = await createOrder(services, account.id, 'created on first start', [])
  services.logger.info({ account: account.id, order: order.id }, 'first start: created the default account')
  return { apiKey, order, password }
}

/** name and version from the package.json above this module (found from src and from dist/ alike). */
export const PACKAGE: { name: string; version: string; description: string } = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'))
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found')
    dir = up
  }
})()
