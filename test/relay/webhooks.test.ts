import { rmSync } from 'node:fs'
import { Webhook } from 'standardwebhooks'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import type * as serveSources from '../../serve.js'
import { startTestServer } from '../helpers.js'
import { startSink } from './sink.js'
import { startEndpoint } from './webhook-endpoint.js'

const { startServer } = (await import(new URL('../../dist/serve.js', import.meta.url).href)) as typeof serveSources

const EVERY_TYPE = ['message.accepted', 'message.delivered', 'message.deferred', 'message.failed', 'message.refused']

// `mailroom serve` in process, a real SMTP sink as the MX and a real HTTP server as the webhook
// endpoint: what an account's endpoint receives, and that standardwebhooks verifies it.
describe('webhooks, end to end', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  /** A server delivering to a sink (rcpt `gone@…` is unknown there), posting webhooks to private addresses. */
  async function start(env: Record<string, string> = {}) {
    const sink = await startSink()
    sink.state.rcptRule = (rcpt) =>
      rcpt.startsWith('gone@') ? { code: 550, message: '5.1.1 no such user' } : undefined
    cleanup.push(() => sink.close())
    const settings = { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`, MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true', ...env }
    const started = await startTestServer('mailroom-webhooks-', settings)
    cleanup.push(() => rmSync(started.dataDir, { recursive: true, force: true }))
    let server = started.server
    cleanup.push(() => server.stop())
    const base = () => `http://127.0.0.1:${server.httpPort}`
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base()}${path}`, {
        method,
        headers: { 'X-API-KEY': started.apiKey, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: res.status, body: await res.json() }
    }
    const send = async (to: string[], subject = 'hello') =>
      (await api('POST', '/mail/send', { from: 'me@example.org', to, subject, body: 'hi' })).body.text as string
    /** A counter's value in GET /metrics (served to loopback). */
    const metric = async (series: string) => {
      const text = await (await fetch(`${base()}/metrics`)).text()
      const line = text.split('\n').find((l) => l.startsWith(`${series} `))
      return line === undefined ? undefined : Number(line.slice(series.length + 1))
    }
    return {
      sink,
      api,
      send,
      metric,
      /** Stops the server and starts another on the same data directory. */
      async restart() {
        await server.stop()
        server = await startServer(loadConfig({ ...rawOf(started), ...settings }))
      },
      started,
    }
  }
  const rawOf = (started: Awaited<ReturnType<typeof startTestServer>>) => ({
    MAILROOM_DATA_DIR: started.dataDir,
    MAILROOM_HTTP_PORT: '0',
    MAILROOM_SMTP_PORT: '0',
    MAILROOM_SMTPS_PORT: '0',
    MAILROOM_LOG_LEVEL: 'silent',
  })

  it('posts the events of a delivered and of a bounced recipient, signed with the secret addWebhook returned', async () => {
    const endpoint = await startEndpoint()
    cleanup.push(() => endpoint.close())
    const { api, send } = await start()
    const added = await api('POST', '/webhooks', { url: endpoint.url, events: EVERY_TYPE, description: 'all' })
    expect(added.status).toBe(200)
    expect(added.body).toEqual({ id: 1, secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/) })
    const txid = await send(['bob@example.com', 'gone@example.com'], 'two fates')

    // Four events of the message, and the delivery of the report to its sender about gone@ (from <>).
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBe(5)
    const verifier = new Webhook(added.body.secret)
    for (const r of endpoint.received) {
      expect(verifier.verify(r.body, r.headers as Record<string, string>)).toEqual(r.event)
      expect(r.headers['webhook-id']).toMatch(/^msg_/)
      expect(r.headers['content-type']).toBe('application/json')
      // The product and its version (RFC 9110 §10.1.5), not the package's scoped name.
      expect(r.headers['user-agent']).toMatch(/^mailroom\/\d+\.\d+\.\d+$/)
      expect(new Date(r.event.timestamp).toISOString()).toBe(r.event.timestamp)
    }
    // A tampered body or another secret is refused by the verifier.
    const [first] = endpoint.received
    expect(() => verifier.verify(`${first.body} `, first.headers as Record<string, string>)).toThrow()
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(
        first.body,
        first.headers as Record<string, string>,
      ),
    ).toThrow()

    const common = { transactionId: txid, from: 'me@example.org', subject: 'two fates', messageId: expect.any(String) }
    expect(endpoint.of('message.accepted').map((r) => r.event.data)).toEqual(
      expect.arrayContaining([
        { ...common, recipient: 'bob@example.com', code: null, response: null, mxHost: null, attempt: 0 },
        { ...common, recipient: 'gone@example.com', code: null, response: null, mxHost: null, attempt: 0 },
      ]),
    )
    expect(endpoint.of('message.delivered').map((r) => r.event.data)).toEqual(
      expect.arrayContaining([
        {
          ...common,
          recipient: 'bob@example.com',
          code: 250,
          response: expect.any(String),
          mxHost: '127.0.0.1',
          attempt: 1,
        },
        {
          transactionId: expect.not.stringMatching(txid),
          recipient: 'me@example.org',
          from: '',
          subject: 'Undelivered Mail Returned to Sender',
          messageId: expect.any(String),
          code: 250,
          response: expect.any(String),
          mxHost: '127.0.0.1',
          attempt: 1,
        },
      ]),
    )
    expect(endpoint.of('message.failed').map((r) => r.event.data)).toEqual([
      {
        ...common,
        recipient: 'gone@example.com',
        code: 550,
        response: expect.stringContaining('no such user'),
        mxHost: '127.0.0.1',
        attempt: 1,
        suppressed: true,
      },
    ])
    expect(new Set(endpoint.received.map((r) => r.headers['webhook-id'])).size).toBe(5)
    expect((await api('GET', '/webhooks')).body).toEqual([
      {
        id: 1,
        url: endpoint.url,
        events: EVERY_TYPE,
        description: 'all',
        created: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/),
        status: 'enabled',
        lastError: null,
      },
    ])
  })

  it('posts message.refused when a deny rule or the spam filter refuses, and only the types asked for', async () => {
    const endpoint = await startEndpoint()
    cleanup.push(() => endpoint.close())
    const { api, send } = await start()
    const { body } = await api('POST', '/webhooks', { url: endpoint.url, events: ['message.refused'] })
    expect((await api('POST', '/mail/rules', { type: 'destination', data: 'nope@example.com' })).status).toBe(200)
    const refused = await api('POST', '/mail/send', {
      from: 'me@example.org',
      to: 'nope@example.com',
      subject: 'refused',
      body: 'x',
    })
    expect(refused.status).toBe(400)
    await send(['bob@example.com'], 'delivered, not asked for')
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBe(1)
    const [r] = endpoint.received
    expect(new Webhook(body.secret).verify(r.body, r.headers as Record<string, string>)).toMatchObject({
      type: 'message.refused',
      data: {
        transactionId: null,
        recipient: 'nope@example.com',
        from: 'me@example.org',
        subject: 'refused',
        code: 550,
        response: expect.stringContaining('rejected by deny rule'),
        mxHost: null,
        attempt: 0,
      },
    })
    // The delivery of the other message, whose events the webhook does not take, adds nothing.
    await new Promise((resolve) => setTimeout(resolve, 1500))
    expect(endpoint.received).toHaveLength(1)
  })

  it('sends an event again after a 500, with the same webhook-id, on MAILROOM_WEBHOOK_RETRY_SCHEDULE', async () => {
    const endpoint = await startEndpoint((n) => (n === 1 ? 500 : 200))
    cleanup.push(() => endpoint.close())
    const { api, send, metric } = await start({ MAILROOM_WEBHOOK_RETRY_SCHEDULE: '1s,1s' })
    await api('POST', '/webhooks', { url: endpoint.url, events: ['message.delivered'] })
    await send(['bob@example.com'])
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBe(2)
    // Each attempt counted in GET /metrics, from the engine thread that made it.
    await expect.poll(() => metric('mailroom_webhook_deliveries_total{result="delivered"}'), { timeout: 5000 }).toBe(1)
    expect(await metric('mailroom_webhook_deliveries_total{result="failed"}')).toBe(1)
    const [a, b] = endpoint.received
    expect(b.headers['webhook-id']).toBe(a.headers['webhook-id'])
    expect(b.body).toBe(a.body)
    expect(Number(b.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(Number(a.headers['webhook-timestamp']))
    // The failure showed on the webhook, and the success cleared it.
    await expect.poll(async () => (await api('GET', '/webhooks')).body[0].status, { timeout: 5000 }).toBe('enabled')
    expect((await api('GET', '/webhooks')).body[0].lastError).toContain('answered HTTP 500: endpoint says no')
  })

  it('gives up on an event after the last wait of the schedule, and shows the webhook failing', async () => {
    const endpoint = await startEndpoint(() => 503)
    cleanup.push(() => endpoint.close())
    const { api, send } = await start({ MAILROOM_WEBHOOK_RETRY_SCHEDULE: '1s' })
    await api('POST', '/webhooks', { url: endpoint.url, events: ['message.delivered'] })
    await send(['bob@example.com'])
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBe(2)
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect(endpoint.received).toHaveLength(2)
    expect((await api('GET', '/webhooks')).body[0]).toMatchObject({
      status: 'failing',
      lastError: expect.stringContaining('answered HTTP 503'),
    })
  })

  it('delivers at full speed while the endpoint never answers', async () => {
    const endpoint = await startEndpoint(() => 'hang')
    cleanup.push(() => endpoint.close())
    const { api, send, sink } = await start()
    await api('POST', '/webhooks', { url: endpoint.url, events: EVERY_TYPE })
    await send(['first@example.com'], 'first')
    // The endpoint holds the worker's requests from now on, each for the whole 10 s timeout.
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBeGreaterThan(1)
    const startedAt = Date.now()
    const txids = await Promise.all(Array.from({ length: 40 }, (_, i) => send([`r${i}@example.com`], `m${i}`)))
    await expect.poll(() => sink.messages.length, { timeout: 15_000 }).toBe(41)
    expect(Date.now() - startedAt).toBeLessThan(5_000)
    const log = await api('GET', `/mail/log?mailid=${txids[0]}`)
    expect(log.body.emails[0]).toMatchObject({ delivered: 1 })
  })

  it('keeps events that were not sent yet across a restart, and sends them after it with the same webhook-id', async () => {
    const endpoint = await startEndpoint(() => 503)
    cleanup.push(() => endpoint.close())
    const s = await start({ MAILROOM_WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s,1s,1s,1s' })
    await s.api('POST', '/webhooks', { url: endpoint.url, events: ['message.delivered'] })
    await s.send(['bob@example.com'])
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBeGreaterThan(0)
    const id = endpoint.received[0].headers['webhook-id']
    await s.restart()
    const before = endpoint.received.length
    endpoint.state.answer = () => 200
    await expect.poll(() => endpoint.received.length, { timeout: 15_000 }).toBeGreaterThan(before)
    expect(endpoint.received.every((r) => r.headers['webhook-id'] === id)).toBe(true)
    await expect.poll(async () => (await s.api('GET', '/webhooks')).body[0].status, { timeout: 5000 }).toBe('enabled')
  })
})
