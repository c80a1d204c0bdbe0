import { rmSync } from 'node:fs'
import { expect } from 'vitest'
import { openRuntime } from '../../runtime.js'
import { silentLogger, startTestServer } from '../helpers.js'
import { startSink } from './sink.js'
import { startEndpoint } from './webhook-endpoint.js'

/**
 * `mailroom serve` in process with what a test of its mail needs around it: a sink as every
 * destination (MAILROOM_SMARTHOST), a webhook endpoint it may post to, and a second connection to
 * its data directory as `mailroom` commands open one. `webhook` subscribes the first account to
 * those event types. `close` stops and removes everything.
 */
export async function startRelayServer(prefix: string, env: Record<string, string>, webhook: string[] = []) {
  const sink = await startSink()
  const endpoint = await startEndpoint()
  const started = await startTestServer(prefix, {
    MAILROOM_SMTPS_PORT: 'off',
    MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true',
    ...env,
  })
  const admin = await openRuntime(started.config, { logger: silentLogger })
  const base = `http://127.0.0.1:${started.server.httpPort}`
  /** A REST call as the first account, with a JSON body. */
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { 'X-API-KEY': started.apiKey, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  if (webhook.length) {
    const hook = await api('POST', '/webhooks', { url: endpoint.url, events: webhook })
    if (hook.status !== 200) throw new Error(`the webhook was not added: ${await hook.text()}`)
  }
  return {
    ...started,
    sink,
    endpoint,
    admin,
    base,
    api,
    /** The message whose bytes hold `text`, as the sink received it, once it did. */
    arrived: async (text: string) => {
      await expect
        .poll(() => sink.messages.some((m) => m.raw.includes(text)), { timeout: 15_000, interval: 50 })
        .toBe(true)
      return sink.messages.find((m) => m.raw.includes(text))!.raw
    },
    close: async () => {
      await admin.close()
      await started.server.stop()
      await sink.close()
      await endpoint.close()
      rmSync(started.dataDir, { recursive: true, force: true })
    },
  }
}
