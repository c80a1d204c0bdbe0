import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, type Config } from './config.js'
import { createRelay } from './relay/pipeline.js'
import { DB_FILE, openDataDir } from './storage/sqlite.js'
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
    store = openDataDir(config.dataDir)
  } catch (err) {
    throw new ConfigError(
      `cannot open the data directory ${config.dataDir} (MAILROOM_DATA_DIR): ${(err as Error).message}`,
    )
  }
  return { ...createServices(store, config, options), close: () => store.close() }
}
