import { readFileSync, rmSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMetrics, type EngineCall, forwardedMetrics } from '../metrics.js'
import { MX_REFUSAL_REASONS, REFUSAL_REASONS } from '../relay/refusal.js'
import type { RunningServer } from '../serve.js'
import { silentLogger, startTestServer } from './helpers.js'
import { parsePrometheusText, seriesValue } from './prometheus-text.js'
import { startSink } from './relay/sink.js'
import { refusal, SmtpClient } from './relay/submission-client.js'

const queueOf = (depth: () => Promise<{ recipients: number; oldestQueuedAt: number | null }>) => ({
  queue: { depth } as never,
})

describe('the metrics module', () => {
  it('renders the Prometheus text format, every mailroom series there from the start', async () => {
    const metrics = createMetrics({
      store: queueOf(async () => ({ recipients: 0, oldestQueuedAt: null })),
      clock: () => 0,
      logger: silentLogger,
    })
    // prom-client reports the CPU used since the metrics were created, which on a
    // tick-accounted kernel can read 0 for a short span: spend 20 ms of it first.
    const start = process.cpuUsage().user
    while (process.cpuUsage().user - start < 20_000) {}
    const { contentType, body } = await metrics.render()
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8')
    const families = parsePrometheusText(body)
    const ours = [...families.values()].filter((f) => f.name.startsWith('mailroom_'))
    for (const f of ours) expect([f.name, f.help.length > 0, f.type !== 'untyped']).toEqual([f.name, true, true])
    expect(ours.map((f) => f.name)).toEqual([
      'mailroom_messages_accepted_total',
      'mailroom_messages_refused_total',
      'mailroom_mx_messages_received_total',
      'mailroom_mx_refused_total',
      'mailroom_deliveries_total',
      'mailroom_delivery_latency_seconds',
      'mailroom_queue_depth',
      'mailroom_queue_oldest_age_seconds',
      'mailroom_smtp_sessions_open',
      'mailroom_http_requests_total',
      'mailroom_webhook_deliveries_total',
    ])
    expect(seriesValue(families, 'mailroom_messages_refused_total', { door: 'smtp', reason: 'spam_trap' })).toBe(0)
    expect(seriesValue(families, 'mailroom_deliveries_total', { result: 'deferred' })).toBe(0)
    expect(seriesValue(families, 'mailroom_mx_refused_total', { reason: 'relay_denied' })).toBe(0)
    expect(seriesValue(families, 'mailroom_webhook_deliveries_total', { result: 'failed' })).toBe(0)
    // The process's own, under their usual names.
    expect(seriesValue(families, 'process_cpu_user_seconds_total')).toBeGreaterThan(0)
    expect(families.get('nodejs_heap_size_used_bytes')?.type).toBe('gauge')
  })

  it('counts what another thread forwards, once it is replayed; the latency only of what was delivered', async () => {
    const metrics = createMetrics({
      store: queueOf(async () => ({ recipients: 0, oldestQueuedAt: null })),
      clock: () => 0,
      logger: silentLogger,
      process: false,
    })
    const posted: EngineCall[] = []
    const engine = forwardedMetrics((call) => posted.push(call))
    engine.delivery('delivered', 1_000, 3_500)
    engine.delivery('deferred', 1_000, 4_000)
    engine.delivery('failed', 1_000, 9_000)
    engine.webhookDelivery('delivered')
    let families = parsePrometheusText((await metrics.render()).body)
    expect(seriesValue(families, 'mailroom_deliveries_total', { result: 'delivered' })).toBe(0)
    // What crosses between threads is a structured clone.
    metrics.replay(structuredClone(posted))
    families = parsePrometheusText((await metrics.render()).body)
    expect(
      ['delivered', 'deferred', 'failed'].map((result) =>
        seriesValue(families, 'mailroom_deliveries_total', { result }),
      ),
    ).toEqual([1, 1, 1])
    expect(seriesValue(families, 'mailroom_delivery_latency_seconds_count')).toBe(1)
    expect(seriesValue(families, 'mailroom_delivery_latency_seconds_sum')).toBe(2.5)
    expect(seriesValue(families, 'mailroom_delivery_latency_seconds_bucket', { le: '2.5' })).toBe(1)
    expect(seriesValue(families, 'mailroom_delivery_latency_seconds_bucket', { le: '1' })).toBe(0)
    expect(seriesValue(families, 'mailroom_webhook_deliveries_total', { result: 'delivered' })).toBe(1)
  })

  it("reads the queue's depth and oldest age at each scrape; says they are unknown while the store fails", async () => {
    let depth = async () => ({ recipients: 3, oldestQueuedAt: 10_000 as number | null })
    const metrics = createMetrics({ store: queueOf(() => depth()), clock: () => 70_000, logger: silentLogger })
    let families = parsePrometheusText((await metrics.render()).body)
    expect([
      seriesValue(families, 'mailroom_queue_depth'),
      seriesValue(families, 'mailroom_queue_oldest_age_seconds'),
    ]).toEqual([3, 60])
    depth = async () => ({ recipients: 0, oldestQueuedAt: null })
    families = parsePrometheusText((await metrics.render()).body)
    expect([
      seriesValue(families, 'mailroom_queue_depth'),
      seriesValue(families, 'mailroom_queue_oldest_age_seconds'),
    ]).toEqual([0, 0])
    depth = async () => {
      throw new Error('database is locked')
    }
    families = parsePrometheusText((await metrics.render()).body)
    expect(seriesValue(families, 'mailroom_queue_depth')).toBeNaN()
    expect(seriesValue(families, 'mailroom_messages_accepted_total', { door: 'api' })).toBe(0)
  })

  it('docs/operations.md describes every metric and every refusal reason', async () => {
    const doc = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8')
    const metrics = createMetrics({
      store: queueOf(async () => ({ recipients: 0, oldestQueuedAt: null })),
      clock: () => 0,
      logger: silentLogger,
      process: false,
    })
    const names = [...parsePrometheusText((await metrics.render()).body).keys()]
    expect(names.filter((name) => !doc.includes(`\`${name}\``))).toEqual([])
    expect(Object.keys(REFUSAL_REASONS).filter((reason) => !doc.includes(`\`${reason}\``))).toEqual([])
    const mxReasons = doc.slice(doc.indexOf('The `reason` of a refusal by the MX door'))
    expect(Object.keys(MX_REFUSAL_REASONS).filter((reason) => !mxReasons.includes(`| \`${reason}\` |`))).toEqual([])
  })
})

// `mailroom serve` in process, a real SMTP sink as the smarthost: what an operator's Prometheus sees.
describe('GET /metrics of mailroom serve', () => {
  let server: RunningServer
  let dataDir: string
  let apiKey: string
  let smtp: { user: string; pass: string }
  let sink: Awaited<ReturnType<typeof startSink>>
  let base: string

  beforeAll(async () => {
    sink = await startSink()
    // A proxy on this machine is trusted, so that X-Forwarded-For can make a request come from elsewhere.
    const started = await startTestServer('mailroom-metrics-', {
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_TRUST_PROXY: 'loopback',
    })
    ;({ server, dataDir, apiKey, smtp } = started)
    base = `http://127.0.0.1:${server.httpPort}`
  })
  afterAll(async () => {
    await server.stop()
    await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const scrape = async () => {
    const res = await fetch(`${base}/metrics`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
    return parsePrometheusText(await res.text())
  }
  /** The value of one series at the next scrape. */
  const metric = async (name: string, labels: Record<string, string> = {}) => seriesValue(await scrape(), name, labels)
  /** Polls until the series reaches `value` (what the engine thread counts arrives a moment later). */
  const reaches = (name: string, labels: Record<string, string>, value: number) =>
    expect.poll(() => metric(name, labels), { timeout: 15_000, interval: 50 }).toBe(value)
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  const send = (to: string, subject: string) =>
    api('POST', '/mail/send', { from: 'me@example.org', to, subject, body: 'hello' })
  const logTotal = async () => ((await (await api('GET', '/mail/log')).json()) as { total: number }).total
  const smtpClient = async () => {
    const client = await SmtpClient.open(server.smtpPort)
    await client.login(smtp.user, smtp.pass)
    return client
  }

  it('counts a send over REST, its delivery and its latency from acceptance', async () => {
    const before = await scrape()
    const at = (name: string, labels: Record<string, string> = {}) => seriesValue(before, name, labels) ?? 0
    const res = await send('bob@example.com', 'counted over REST')
    expect(res.status).toBe(200)
    await expect.poll(() => sink.messages.length, { timeout: 15_000 }).toBe(1)
    const delivered = at('mailroom_deliveries_total', { result: 'delivered' }) + 1
    await reaches('mailroom_deliveries_total', { result: 'delivered' }, delivered)
    const after = await scrape()
    expect(seriesValue(after, 'mailroom_messages_accepted_total', { door: 'api' })).toBe(
      at('mailroom_messages_accepted_total', { door: 'api' }) + 1,
    )
    expect(seriesValue(after, 'mailroom_messages_accepted_total', { door: 'smtp' })).toBe(
      at('mailroom_messages_accepted_total', { door: 'smtp' }),
    )
    expect(seriesValue(after, 'mailroom_delivery_latency_seconds_count')).toBe(
      at('mailroom_delivery_latency_seconds_count') + 1,
    )
    expect(seriesValue(after, 'mailroom_delivery_latency_seconds_bucket', { le: '+Inf' })).toBe(
      at('mailroom_delivery_latency_seconds_count') + 1,
    )
    expect(seriesValue(after, 'mailroom_delivery_latency_seconds_sum')).toBeGreaterThan(0)
    expect(
      seriesValue(after, 'mailroom_http_requests_total', { method: 'POST', route: '/mail/send', status: '200' }),
    ).toBe(at('mailroom_http_requests_total', { method: 'POST', route: '/mail/send', status: '200' }) + 1)
  })

  it('counts a send over SMTP, and the session while it is open', async () => {
    const accepted = (await metric('mailroom_messages_accepted_total', { door: 'smtp' }))!
    const delivered = (await metric('mailroom_deliveries_total', { result: 'delivered' }))!
    const client = await smtpClient()
    expect(await metric('mailroom_smtp_sessions_open')).toBe(1)
    await client.send(
      { from: 'me@example.org', to: ['carol@example.com'] },
      'From: me@example.org\r\nTo: carol@example.com\r\nSubject: counted over SMTP\r\n\r\nhello\r\n',
    )
    expect(await metric('mailroom_messages_accepted_total', { door: 'smtp' })).toBe(accepted + 1)
    client.close()
    await reaches('mailroom_smtp_sessions_open', {}, 0)
    await reaches('mailroom_deliveries_total', { result: 'delivered' }, delivered + 1)
  })

  it("shows the queue's depth and oldest age while a delivery waits, and again once it is out", async () => {
    let release = () => {}
    sink.state.hold = new Promise<void>((resolve) => (release = resolve))
    const received = sink.state.received
    try {
      expect((await send('dave@example.com', 'held at the sink')).status).toBe(200)
      await expect.poll(() => sink.state.received, { timeout: 15_000 }).toBe(received + 1)
      // The earlier sends' outcomes may take a moment to be recorded.
      await reaches('mailroom_queue_depth', {}, 1)
      await expect.poll(() => metric('mailroom_queue_oldest_age_seconds'), { timeout: 5_000 }).toBeGreaterThan(0)
    } finally {
      release()
      sink.state.hold = undefined
    }
    await reaches('mailroom_queue_depth', {}, 0)
    expect(await metric('mailroom_queue_oldest_age_seconds')).toBe(0)
  })

  it('counts a deferral: the recipient stays in the queue', async () => {
    const deferred = (await metric('mailroom_deliveries_total', { result: 'deferred' }))!
    sink.state.rcptRule = (rcpt) => (rcpt === 'later@example.com' ? { code: 451, message: '4.7.1 later' } : undefined)
    try {
      expect((await send('later@example.com', 'deferred at the sink')).status).toBe(200)
      await reaches('mailroom_deliveries_total', { result: 'deferred' }, deferred + 1)
      expect(await metric('mailroom_queue_depth')).toBe(1)
    } finally {
      sink.state.rcptRule = undefined
    }
  })

  it('counts a refusal by a deny rule under its reason and door; nothing is stored or sent', async () => {
    const rule = await (
      await api('POST', '/mail/rules', { type: 'destination', data: 'nobody@blocked.example' })
    ).json()
    expect(rule).toMatchObject({ status: 'ok' })
    const before = await scrape()
    const at = (name: string, labels: Record<string, string>) => seriesValue(before, name, labels)!
    const [logged, sunk] = [await logTotal(), sink.messages.length]

    const res = await send('nobody@blocked.example', 'refused')
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      code: 400,
      message: expect.stringMatching(
        /^to: recipient nobody@blocked\.example is rejected by deny rule \d+ \(destination nobody@blocked\.example\)$/,
      ),
    })
    const client = await smtpClient()
    const err = await refusal(
      client.send({ from: 'me@example.org', to: ['nobody@blocked.example'] }, 'Subject: refused\r\n\r\nhello\r\n'),
    )
    expect(err.rejectedErrors?.[0]?.responseCode ?? err.responseCode).toBe(550)
    client.close()

    const after = await scrape()
    for (const door of ['api', 'smtp'])
      expect([door, seriesValue(after, 'mailroom_messages_refused_total', { door, reason: 'deny_rule' })]).toEqual([
        door,
        at('mailroom_messages_refused_total', { door, reason: 'deny_rule' }) + 1,
      ])
    for (const door of ['api', 'smtp'])
      expect(seriesValue(after, 'mailroom_messages_accepted_total', { door })).toBe(
        at('mailroom_messages_accepted_total', { door }),
      )
    expect([await logTotal(), sink.messages.length]).toEqual([logged, sunk])
  })

  it('labels requests by route pattern, never by an order, an address or a raw path', async () => {
    expect((await api('GET', '/mail/1')).status).toBe(200)
    expect((await api('GET', '/mail/log?to=bob@example.com')).status).toBe(200)
    expect((await api('GET', '/no/such/thing')).status).toBe(404)
    const families = await scrape()
    expect(
      seriesValue(families, 'mailroom_http_requests_total', { method: 'GET', route: '/mail/{id}', status: '200' }),
    ).toBe(1)
    expect(
      seriesValue(families, 'mailroom_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }),
    ).toBeGreaterThanOrEqual(1)
    const values = [...families.values()].flatMap((f) => f.samples.flatMap((s) => Object.values(s.labels)))
    expect(values.filter((v) => /@|mb\d|\/mail\/\d|\/no\/such/.test(v))).toEqual([])
  })

  it('is refused (403) to a client elsewhere, seen through a trusted proxy; served to one on this machine', async () => {
    const get = (forwardedFor?: string) =>
      fetch(`${base}/metrics`, { headers: forwardedFor ? { 'X-Forwarded-For': forwardedFor } : {} })
    const res = await get('203.0.113.9')
    expect(res.status).toBe(403)
    expect(await res.json()).toEqual({
      code: 403,
      message:
        '/metrics is served only to clients on this machine (loopback, not through a proxy) unless MAILROOM_METRICS_TOKEN is set',
    })
    expect((await get('127.0.0.1')).status).toBe(200)
    expect((await get()).status).toBe(200)
  })
})

describe('GET /metrics of mailroom serve with MAILROOM_METRICS_TOKEN', () => {
  const TOKEN = 'f3c1d2e4a5b6978877665544332211aa'
  let server: RunningServer
  let dataDir: string

  beforeAll(async () => {
    ;({ server, dataDir } = await startTestServer('mailroom-metrics-token-', {
      MAILROOM_METRICS_TOKEN: TOKEN,
      MAILROOM_TRUST_PROXY: 'loopback',
    }))
  })
  afterAll(async () => {
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const get = (headers: Record<string, string>) => fetch(`http://127.0.0.1:${server.httpPort}/metrics`, { headers })

  it.each([
    ['no token', {}],
    ['a wrong token', { Authorization: `Bearer ${TOKEN.slice(0, -1)}b` }],
    ['the token under another scheme', { Authorization: `Basic ${TOKEN}` }],
    ['the token as an API key', { 'X-API-KEY': TOKEN }],
  ])('answers %s with 401, and no metrics', async (_, headers) => {
    const res = await get(headers)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="mailroom metrics"')
    expect(await res.json()).toEqual({
      code: 401,
      message:
        'the metrics token is missing or wrong: send Authorization: Bearer <the value of MAILROOM_METRICS_TOKEN>',
    })
  })

  it('serves the metrics for the right token, from this machine or from elsewhere', async () => {
    for (const headers of [
      { Authorization: `Bearer ${TOKEN}` },
      { Authorization: `Bearer ${TOKEN}`, 'X-Forwarded-For': '203.0.113.9' },
    ]) {
      const res = await get(headers)
      expect(res.status).toBe(200)
      expect(seriesValue(parsePrometheusText(await res.text()), 'mailroom_queue_depth')).toBe(0)
    }
  })
})
