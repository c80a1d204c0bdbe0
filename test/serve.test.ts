import { rmSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningServer } from '../serve.js'
import { startTestServer } from './helpers.js'

// `mailroom serve` in process, reached over real sockets: what Node's HTTP server itself answers.
describe('mailroom serve over HTTP', () => {
  let dataDir: string
  let server: RunningServer
  let apiKey: string

  beforeAll(async () => {
    ;({ server, dataDir, apiKey } = await startTestServer('mailroom-serve-'))
  })
  afterAll(async () => {
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** Writes `raw` on a new connection and reads until the server closes it. */
  const exchange = (raw: string) =>
    new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
      const socket = connect(server.httpPort, '127.0.0.1')
      let got = ''
      socket.on('data', (d) => (got += d))
      socket.on('error', reject)
      socket.on('close', () => {
        const [head, body] = [got.slice(0, got.indexOf('\r\n\r\n')), got.slice(got.indexOf('\r\n\r\n') + 4)]
        const [statusLine, ...lines] = head.split('\r\n')
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        )
        resolve({ status: Number(statusLine.split(' ')[1]), headers, body })
      })
      socket.end(raw)
    })

  const queued = async () => {
    const res = await fetch(`http://127.0.0.1:${server.httpPort}/mail/log`, { headers: { 'X-API-KEY': apiKey } })
    return ((await res.json()) as { total: number }).total
  }

  it('opens no MX door unless MAILROOM_MX_LISTEN_PORT asks for one', () => {
    expect(server.mxPort).toBeNull()
  })

  it('answers /healthz and /readyz without a key while it runs', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`http://127.0.0.1:${server.httpPort}${path}`)
      expect([path, res.status, await res.json()]).toEqual([path, 200, { status: 'ok' }])
    }
  })

  it('answers headers over 16 KB with a JSON 431', async () => {
    const res = await exchange(
      `POST /mail/send HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${apiKey}\r\nX-Padding: ${'a'.repeat(20_000)}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    )
    expect(res.status).toBe(431)
    expect(res.headers['content-type']).toBe('application/json')
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    expect(JSON.parse(res.body)).toEqual({ code: 431, message: "the request's headers are larger than 16384 bytes" })
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.body))
  })

  it.each([
    ['a Content-Length that is not a number', 'Content-Length: 12x'],
    ['two different Content-Lengths', 'Content-Length: 40\r\nContent-Length: 41'],
  ])('answers %s with a JSON 400, and queues nothing', async (_, lengths) => {
    const send = JSON.stringify({ to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' })
    const res = await exchange(
      `POST /mail/send HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${apiKey}\r\nContent-Type: application/json\r\n${lengths}\r\n\r\n${send}`,
    )
    expect(res.status).toBe(400)
    expect(res.headers['content-type']).toBe('application/json')
    expect(JSON.parse(res.body)).toEqual({
      code: 400,
      message: expect.stringMatching(/^the request is not valid HTTP: .*Content-Length/),
    })
    expect(await queued()).toBe(0)
  })

  it('keeps an idle keep-alive connection longer than the proxies in front of it (60 s), and says so', async () => {
    const agent = new Agent({ keepAlive: true })
    const keepAlive = await new Promise<string | undefined>((resolve, reject) => {
      request({ port: server.httpPort, host: '127.0.0.1', path: '/ping', agent }, (res) => {
        res.resume()
        resolve(res.headers['keep-alive'])
      })
        .on('error', reject)
        .end()
    })
    agent.destroy()
    expect(Number(/^timeout=(\d+)$/.exec(keepAlive ?? '')?.[1])).toBeGreaterThan(60)
  })
})
