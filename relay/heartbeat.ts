import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { ServerHeartbeat, Store } from '../storage/store.js'

/** How often a running `mailroom serve` renews its row in the store. */
export const HEARTBEAT_MS = 5_000
/**
 * A server not heard of for this long is taken for gone (killed, its machine lost): a `mailroom
 * stdio` then delivers again. Several beats long, so that a busy server is not taken for dead.
 */
export const HEARTBEAT_EXPIRY_MS = 30_000

/** Where mail goes under these delivery settings (`sink`: those of `serve --sink`), in words, for the log and the banner. */
export function deliveryTarget(delivery: Pick<Config['delivery'], 'smarthost'>, sink = false): string {
  const { smarthost } = delivery
  if (sink)
    return `the sink of mailroom serve --sink at ${smarthost!.host}:${smarthost!.port}, which prints each message: none leaves this machine`
  if (smarthost) return `the smarthost ${smarthost.host}:${smarthost.port} (MAILROOM_SMARTHOST)`
  return "the recipients' MX hosts, found by DNS: real mail"
}

/**
 * Keeps this server's row in the store, renewed every HEARTBEAT_MS, from now until `stop()`, which
 * deletes it: a `mailroom stdio` on the same database then leaves delivery to this server.
 */
export async function startHeartbeat(
  deps: { store: Store; logger: Logger; clock: () => number },
  server: Omit<ServerHeartbeat, 'id' | 'beatAt'>,
): Promise<{ stop(): Promise<void> }> {
  const { store, logger, clock } = deps
  const me = { id: randomUUID(), ...server }
  const beat = () =>
    store.servers.beat(me, clock()).catch((err) => logger.error({ err }, 'renewing the heartbeat failed'))
  await beat()
  const timer = setInterval(beat, HEARTBEAT_MS)
  timer.unref()
  return {
    async stop() {
      clearInterval(timer)
      await store.servers.end(me.id).catch((err) => logger.error({ err }, 'ending the heartbeat failed; it expires'))
    },
  }
}

/** The `mailroom serve` heard of most recently on this database, unless none runs. */
export async function runningServer(deps: { store: Store; clock: () => number }): Promise<ServerHeartbeat | undefined> {
  return (await deps.store.servers.running(deps.clock() - HEARTBEAT_EXPIRY_MS))[0]
}
