import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, type Config } from '../config.js'
import { WrongSecretError } from './secrets.js'
import { DB_FILE, openDataDir } from './sqlite/index.js'
import type { Store } from './store.js'

export interface OpenStoreOptions {
  /** Refuse a data directory without a database rather than create one (an admin command pointed at the wrong place must not answer from a new, empty one). */
  existing?: boolean
  /** This connection mostly appends (the engine's queue writes): keep its page cache small. */
  appending?: boolean
}

/**
 * Opens the store the configuration names: PostgreSQL at MAILROOM_DATABASE_URL, or else SQLite in
 * the data directory (either created and migrated on open). A store that cannot be opened is a
 * ConfigError that names the setting behind it.
 */
export async function openStore(config: Config, options: OpenStoreOptions = {}): Promise<Store> {
  if (config.databaseUrl) return openServerDatabase(config.databaseUrl, config, options)
  if (options.existing && !existsSync(join(config.dataDir, DB_FILE))) {
    throw new ConfigError(
      `no mailroom database in ${config.dataDir} (MAILROOM_DATA_DIR): point it at the data directory of \`mailroom serve\`, which creates one on its first start`,
    )
  }
  let store: ReturnType<typeof openDataDir>
  try {
    store = openDataDir(config.dataDir, config.secretKey, { logReadTimeout: config.logReadTimeout })
  } catch (err) {
    if (err instanceof WrongSecretError) throw new ConfigError(wrongSecretMessage(config.dataDir, err.file))
    throw new ConfigError(
      `cannot open the data directory ${config.dataDir} (MAILROOM_DATA_DIR): ${(err as Error).message}`,
    )
  }
  // A small page cache: a large message would otherwise fill SQLite's 16 MB default here,
  // beside the main connection's own.
  if (options.appending) store.sqlite.pragma('cache_size = -4000')
  return store
}

/** PostgreSQL, shared by every node: loaded only when asked for, so that SQLite's users never load its driver. */
async function openServerDatabase(url: string, config: Config, options: OpenStoreOptions): Promise<Store> {
  if (!config.secretKey)
    throw new ConfigError(
      'MAILROOM_DATABASE_URL needs MAILROOM_SECRET_KEY: every node and the mailroom command must encrypt order passwords and DKIM keys with the same secret. Make one with `openssl rand -base64 32` and give the same value to each of them',
    )
  const { openPostgresStore, NotMigratedError } = await import('./postgres/index.js')
  try {
    // A copy: a secret that crossed to a thread arrives as a plain Uint8Array.
    return await openPostgresStore({
      url,
      secret: Buffer.from(config.secretKey),
      existing: options.existing,
      logReadTimeout: config.logReadTimeout,
    })
  } catch (err) {
    if (err instanceof WrongSecretError)
      throw new ConfigError(
        `MAILROOM_SECRET_KEY does not decrypt the order passwords and DKIM keys stored in ${storeName(config)}: give it the value the other nodes have`,
      )
    if (err instanceof NotMigratedError)
      throw new ConfigError(
        `no mailroom database in ${storeName(config)}: point it at the database of \`mailroom serve\`, which creates its tables on its first start`,
      )
    throw new ConfigError(`cannot open ${storeName(config)}: ${(err as Error).message}`)
  }
}

function wrongSecretMessage(dataDir: string, file: string | null): string {
  const fix = file
    ? `they were encrypted with the key in ${file}: set MAILROOM_SECRET_KEY to its content ("$(cat ${file})"), or unset it to use the file`
    : 'they were encrypted with another key: set MAILROOM_SECRET_KEY to that one'
  return `MAILROOM_SECRET_KEY does not decrypt the order passwords and DKIM keys stored in ${dataDir}; ${fix}`
}

/** Where the configured store is, for messages: never the database's password. */
export function storeName(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  if (!config.databaseUrl) return `the data directory ${config.dataDir} (MAILROOM_DATA_DIR)`
  const url = new URL(config.databaseUrl)
  return `the PostgreSQL database ${url.pathname.slice(1) || 'postgres'} on ${url.host} (MAILROOM_DATABASE_URL)`
}
