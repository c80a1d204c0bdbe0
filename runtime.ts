import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, type Config } from './config.js'
import { createRelay } from './relay/pipeline.js'
import { DB_FILE, openDataDir } from './storage/sqlite/index.js'
import { WrongSecretError } from './storage/secrets.js'
import type { Store } from './storage/store.js'
import type { Services } from './tools/define.js'

export interface Runtime extends Services {
  close(): Promise<void>
}

/** Wires the services around a store. */
export function createServices(
  store: Store,
  config: Config,
  options: { logger: Logger; clock?: () => number },
): Services {
  const clock = options.clock ?? Date.now
  const relay = createRelay({ store, config, logger: options.logger, clock })
  return { store, relay, config, logger: options.logger, clock }
}

/**
 * Opens the data directory (creating and migrating the database) and wires the services. With
 * `existing`, a directory without a database is refused rather than created (an admin command
 * pointed at the wrong place must not answer from a new, empty one).
 */
export function openRuntime(
  config: Config,
  options: { logger: Logger; clock?: () => number; existing?: boolean },
): Runtime {
  if (options.existing && !existsSync(join(config.dataDir, DB_FILE))) {
    throw new ConfigError(
      `no mailroom database in ${config.dataDir} (MAILROOM_DATA_DIR): point it at the data directory of \`mailroom serve\`, which creates one on its first start`,
    )
  }
  let store: ReturnType<typeof openDataDir>
  try {
    store = openDataDir(config.dataDir, config.secretKey)
  } catch (err) {
    if (err instanceof WrongSecretError) throw new ConfigError(wrongSecretMessage(config.dataDir, err.file))
    throw new ConfigError(
      `cannot open the data directory ${config.dataDir} (MAILROOM_DATA_DIR): ${(err as Error).message}`,
    )
  }
  return { ...createServices(store, config, options), close: () => store.close() }
}

function wrongSecretMessage(dataDir: string, file: string | null): string {
  const fix = file
    ? `they were encrypted with the key in ${file}: set MAILROOM_SECRET_KEY to its content ("$(cat ${file})"), or unset it to use the file`
    : 'they were encrypted with another key: set MAILROOM_SECRET_KEY to that one'
  return `MAILROOM_SECRET_KEY does not decrypt the order passwords and DKIM keys stored in ${dataDir}; ${fix}`
}
