import { afterEach, describe, expect, it } from 'vitest'
import { createMetrics } from '../../metrics.js'
import { createHttpApp } from '../../transports/http.js'
import { createTestEnv, silentLogger, type TestEnv } from '../helpers.js'
import { parsePrometheusText, seriesValue } from '../prometheus-text.js'

const TOKEN = 'a-metrics-token-0123456789'

// GET /metrics as the HTTP app serves it, called with app.request: the client's address is the
// one its socket would have (`incoming`), 127.0.0.1 unless given.
describe('GET /metrics', () => {
  let env: TestEnv
  afterEach(() => env.close())

  const appWith = async (settings: Record<string, string> = {}) => {
    env = await createTestEnv(settings)
    const metrics = createMetrics({ store: env.services.store, clock: env.clock, logger: silentLogger, process: false })
    return createHttpApp({ ...env.services, config: env.config }, { metrics })
  }
  const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } })
  const get = (app: Awaited<ReturnType<typeof appWith>>, headers: Record<string, string> = {}, address = '127.0.0.1') =>
    app.request('/metrics', { headers }, from(address))
  const LOOPBACK_ONLY = {
    code: 403,
    message:
      '/metrics is served only to clients on this machine (loopback, not through a proxy) unless MAILROOM_METRICS_TOKEN is set',
  }

  it.each([
    ['127.0.0.1', {}],
    ['127.0.0.2', {}],
    ['::1', {}],
    ['::ffff:127.0.0.1', {}],
  ])('without a token, serves a client at %s', async (address, headers) => {
    const res = await get(await appWith(), headers, address)
    expect(res.status).toBe(200)
    expect(res.headers.get('cache-control')).toBe('no-store')
    expect(parsePrometheusText(await res.text()).has('mailroom_queue_depth')).toBe(true)
  })

  it.each([
    ['a client elsewhere', {}, '192.0.2.7', {}],
    ['a request a proxy here forwarded, no proxy being trusted', { 'X-Forwarded-For': '203.0.113.9' }, '127.0.0.1', {}],
    [
      'a client elsewhere seen through a trusted proxy',
      { 'X-Forwarded-For': '203.0.113.9' },
      '127.0.0.1',
      { MAILROOM_TRUST_PROXY: 'loopback' },
    ],
    [
      'a request with Forwarded, never read',
      { Forwarded: 'for=203.0.113.9' },
      '127.0.0.1',
      { MAILROOM_TRUST_PROXY: 'loopback' },
    ],
    ['a request with X-Real-IP, never read', { 'X-Real-IP': '203.0.113.9' }, '127.0.0.1', {}],
    [
      'a client elsewhere claiming loopback, from a proxy not trusted',
      { 'X-Forwarded-For': '127.0.0.1' },
      '192.0.2.7',
      { MAILROOM_TRUST_PROXY: '10.0.0.1' },
    ],
  ])('without a token, refuses %s (403)', async (_, headers, address, settings) => {
    const res = await get(await appWith(settings), headers, address)
    expect(res.status).toBe(403)
    expect(await res.json()).toEqual(LOOPBACK_ONLY)
  })

  it('without a token, serves a client on this machine seen through a trusted proxy', async () => {
    const app = await appWith({ MAILROOM_TRUST_PROXY: 'loopback' })
    expect((await get(app, { 'X-Forwarded-For': '127.0.0.1' })).status).toBe(200)
  })

  it.each([
    ['no token', {}],
    ['a wrong token', { Authorization: `Bearer ${TOKEN}x` }],
    ['a token cut short', { Authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ['an empty bearer', { Authorization: 'Bearer ' }],
  ])('with a token set, answers %s with 401, from loopback too', async (_, headers) => {
    const res = await get(await appWith({ MAILROOM_METRICS_TOKEN: TOKEN }), headers)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="mailroom metrics"')
    expect(await res.json()).toEqual({
      code: 401,
      message:
        'the metrics token is missing or wrong: send Authorization: Bearer <the value of MAILROOM_METRICS_TOKEN>',
    })
  })

  it('with a token set, serves whoever sends it, wherever they are (the scheme in any case)', async () => {
    const app = await appWith({ MAILROOM_METRICS_TOKEN: TOKEN })
    expect((await get(app, { Authorization: `Bearer ${TOKEN}` }, '192.0.2.7')).status).toBe(200)
    expect((await get(app, { Authorization: `bearer ${TOKEN}` })).status).toBe(200)
  })

  it('answers another method with 405 and Allow: GET', async () => {
    const res = await (await appWith()).request('/metrics', { method: 'POST' }, from('127.0.0.1'))
    expect(res.status).toBe(405)
    expect(res.headers.get('allow')).toBe('GET')
    expect(await res.json()).toEqual({ code: 405, message: 'POST is not allowed on /metrics; use GET' })
  })

  it('is neither a REST route of the OpenAPI document nor a tool', async () => {
    const app = await appWith()
    const spec = (await (await app.request('/spec/openapi.json')).json()) as { paths: Record<string, unknown> }
    expect(Object.keys(spec.paths).filter((p) => p.includes('metrics'))).toEqual([])
  })

  it('counts requests by route pattern and status, a refusal by a middleware under the route it was for', async () => {
    const app = await appWith({ MAILROOM_HTTP_BODY_LIMIT: '1kb' })
    const key = { 'X-API-KEY': env.apiKey }
    await app.request(`/mail/${env.orderId}`, { headers: key })
    await app.request('/mail/9999', { headers: key })
    await app.request('/mail/rules/12', { method: 'DELETE', headers: key })
    await app.request('/mail/send', {
      method: 'POST',
      headers: { ...key, 'Content-Type': 'application/json', 'Content-Length': '5000' },
      body: 'x'.repeat(5000),
    })
    await app.request('/wp-login.php')
    await app.request('/mail', {
      method: 'OPTIONS',
      headers: { Origin: 'https://a.example', 'Access-Control-Request-Method': 'GET' },
    })
    const families = parsePrometheusText(await (await get(app)).text())
    const requests = families.get('mailroom_http_requests_total')!.samples.map((s) => s.labels)
    expect(requests).toEqual([
      { method: 'GET', route: '/mail/{id}', status: '200' },
      { method: 'GET', route: '/mail/{id}', status: '404' },
      { method: 'DELETE', route: '/mail/rules/{ruleId}', status: '404' },
      { method: 'POST', route: '/mail/send', status: '413' },
      { method: 'GET', route: 'unmatched', status: '404' },
      { method: 'OPTIONS', route: '/mail', status: '204' },
    ])
    expect(seriesValue(families, 'mailroom_http_requests_total', requests[0])).toBe(1)
  })
})
