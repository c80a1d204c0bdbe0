import type { Logger } from 'pino'
import type { Config } from './config.js'
import { createByteBudget } from './relay/byte-budget.js'
import { createRelay, type Intake, type RelayDeps } from './relay/pipeline.js'
import { openStore } from './storage/index.js'
import type { Store } from './storage/store.js'
import type { Services } from './tools/define.js'

export interface Runtime extends Services {
  close(): Promise<void>
}

/** Wires the services around a store. */
export function createServices(
  store: Store,
  config: Config,
  options: { logger: Logger; clock?: () => number; intake?: Intake; metrics?: RelayDeps['metrics'] },
): Services {
  const clock = options.clock ?? Date.now
  const relay = createRelay({
    store,
    intake: options.intake,
    config,
    logger: options.logger,
    clock,
    metrics: options.metrics,
  })
  return { store, relay, config, logger: options.logger, clock, budget: createByteBudget(config.memoryBudget) }
}

/**
 * Opens the configured store (see openStore; with `existing`, a missing database is refused
 * rather than created) and wires the services.
 */
export async function openRuntime(
  config: Config,
  options: { logger: Logger; clock?: () => number; existing?: boolean },
): Promise<Runtime> {
  const store = await openStore(config, { existing: options.existing })
  return { ...createServices(store, config, options), close: () => store.close() }
}
