import { serve } from '@hono/node-server'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'
import { loadConfig } from '../../config.js'
import { DeliveryWorker } from '../../relay/delivery.js'
import { createRelay, storeIntake } from '../../relay/pipeline.js'
import { loadTls } from '../../relay/tls.js'
import type { ToolContext } from '../../tools/define.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { startSink, stubResolver } from '../relay/sink.js'

/** The MX of `example.com` in these tests, on loopback where the sink listens. */
export const MX = { name: 'mx.example.com', address: '127.0.0.1' }
/** The retry schedule the worker runs with: the first deferral waits this long. */
export const FIRST_RETRY_MS = 5 * 60_000

/**
 * A test env whose sends go to a real delivery worker, which delivers mail to example.com through
 * a real SMTP sink (with STARTTLS when `tls`), as `mailroom serve`'s engine does. `ctx` and
 * `ctxOf` call tools with that relay; `later` moves the clock and wakes the worker.
 */
export async function deliveringEnv(options: { tls?: boolean } = {}) {
  const certs = options.tls ? mkdtempSync(join(tmpdir(), 'mailroom-tools-tls-')) : undefined
  const tls = certs
    ? await loadTls({ smtp: loadConfig({ MAILROOM_DATA_DIR: certs }).smtp, dataDir: certs, nodeName: MX.name })
    : undefined
  const sink = await startSink(tls ? { tls } : {})
  const env: TestEnv = await createTestEnv({
    MAILROOM_MX_PORT: String(sink.port),
    MAILROOM_ALLOW_PRIVATE_MX: 'true',
    MAILROOM_RETRY_SCHEDULE: '5m,10m',
    MAILROOM_MAX_QUEUE_AGE: '1h',
    MAILROOM_DELIVERY_TIMEOUT: '5s',
  })
  const worker = new DeliveryWorker({
    ...env.services,
    resolver: stubResolver({
      mx: { 'example.com': [{ exchange: MX.name, priority: 10 }] },
      a: { [MX.name]: [MX.address] },
    }),
  })
  await worker.start()
  const relay = createRelay({
    ...env.services,
    intake: { ...storeIntake(env.services.store), enqueue: (message) => worker.accept(message) },
  })
  const ctxOf = (ctx: ToolContext): ToolContext => ({ ...ctx, relay })
  return {
    env,
    sink,
    worker,
    ctx: ctxOf(env.ctx),
    ctxOf,
    later(ms: number) {
      env.clock.advance(ms)
      worker.kick()
    },
    async close() {
      await worker.stop()
      await env.close()
      await sink.close()
      if (certs) rmSync(certs, { recursive: true, force: true })
    },
  }
}

export type DeliveringEnv = Awaited<ReturnType<typeof deliveringEnv>>

/** A test env with its HTTP app (REST and MCP) served on 127.0.0.1, port 0; `close` stops both. */
export async function servedTestEnv(): Promise<{ env: TestEnv; base: string; close(): Promise<void> }> {
  const env = await createTestEnv()
  const server = serve({ fetch: env.app.fetch, hostname: '127.0.0.1', port: 0 })
  await new Promise((r) => server.once('listening', r))
  return {
    env,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await env.app.close()
      await new Promise((r) => server.close(r))
      await env.close()
    },
  }
}

/**
 * The envs of a file's tests, each closed after its test (registered with afterEach): a plain
 * one, one whose mail is delivered, one served over HTTP, and anything else with a close (`keep`).
 */
export function testEnvs() {
  const cleanup: (() => Promise<unknown>)[] = []
  afterEach(async () => {
    for (const close of cleanup.splice(0).reverse()) await close()
  })
  const keep = <T extends { close(): Promise<unknown> }>(it: T): T => {
    cleanup.push(() => it.close())
    return it
  }
  return {
    keep,
    plain: async () => keep(await createTestEnv()),
    delivering: async (options: { tls?: boolean } = {}) => keep(await deliveringEnv(options)),
    served: async () => keep(await servedTestEnv()),
  }
}
