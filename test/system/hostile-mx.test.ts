import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { MAX_STORED_RESPONSE } from '../../relay/delivery.js'
import { MAX_REPLY_LENGTH, MAX_REPLY_LINES } from '../../relay/smtp-session.js'
import { flood, startMuteMx } from '../relay/sink.js'
import { startDnsmasq, startMailroom, startSmtpSink, waitFor } from './peers.js'

/** What the hostile MX does on a connection: flood its EHLO reply, or answer MAIL FROM with a huge or long reply. */
type Mode = 'refuse' | 'endless lines' | 'line without end' | '10 MB line' | 'long reply'

function hostileMx(mode: () => Mode) {
  const server = createServer((socket) => {
    socket.on('error', () => {})
    const m = mode()
    if (m === 'refuse') return void socket.end('554 5.7.1 go away\r\n')
    socket.write('220 evil.example ESMTP\r\n')
    socket.on('data', (d: Buffer) => {
      const line = d.toString('latin1')
      if (line.startsWith('EHLO')) {
        if (m === 'endless lines') flood(socket, `250-${'x'.repeat(60)}\r\n`)
        else if (m === 'line without end') flood(socket, `250-${'x'.repeat(8192)}`)
        else socket.write('250 evil.example\r\n')
      } else if (line.startsWith('MAIL')) {
        if (m === '10 MB line') flood(socket, `550 ${'x'.repeat(10 * 1024 * 1024)}\r\n`, 10 * 1024 * 1024 + 6)
        else socket.write(`${`451-4.3.0 ${'y'.repeat(900)}\r\n`.repeat(60)}451 4.3.0 try again later\r\n`)
      } else if (line.startsWith('QUIT')) socket.end('221 bye\r\n')
      else if (line.startsWith('RSET')) socket.write('250 ok\r\n')
    })
  })
  return server
}

/** The REST API of a `mailroom serve` on its first start, with the API key it printed. */
async function restOf(server: Awaited<ReturnType<typeof startMailroom>>) {
  const apiKey = /API key \(shown only now\): (\S+)/.exec(
    await waitFor(async () => /Try it/.test(server.output()) && server.output()),
  )![1]
  return (path: string, body?: object) =>
    fetch(`http://127.0.0.1:${server.httpPort}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
      body: body && JSON.stringify(body),
    })
}

/** The resident memory of a process, in bytes (Linux). */
const rss = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

// A destination MX is an outside party: whatever it answers, mailroom holds a bounded amount of it,
// keeps serving, and keeps a bounded amount of it in the log.
describe('system: a hostile destination MX', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it('floods neither the memory of mailroom serve nor its log, and the attempts are deferred saying why', async () => {
    let mode: Mode = 'refuse'
    const mx = hostileMx(() => mode)
    await new Promise<void>((r) => mx.listen(0, '127.0.0.1', () => r()))
    cleanup.push(() => new Promise((r) => mx.close(r)))
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-hostile-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    const server = await startMailroom({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_SMARTHOST: `127.0.0.1:${(mx.address() as AddressInfo).port}`,
      MAILROOM_DELIVERY_TIMEOUT: '10s',
    })
    cleanup.push(() => server.child.kill('SIGKILL'))
    const api = await restOf(server)
    /** Sends one message and waits for its first attempt, sampling the server's memory and its answers meanwhile. */
    const attempt = async (m: Mode) => {
      mode = m
      const txid = (
        await (await api('/mail/send', { from: 'me@example.org', to: 'r@example.com', subject: m, body: 'x' })).json()
      ).text as string
      let peak = 0
      const pings: number[] = []
      const row = await waitFor(async () => {
        peak = Math.max(peak, rss(server.child.pid!))
        pings.push((await api('/ping')).status)
        const rows = (await (await api(`/mail/log?mailid=${txid}`)).json()).emails as {
          code: number | null
          response: string | null
        }[]
        return rows[0]?.response ? rows[0] : undefined
      }, 60_000)
      return { row, peak, pings }
    }

    // A first attempt warms up the delivery path; the memory after it is the baseline.
    expect((await attempt('refuse')).row).toMatchObject({ code: 554 })
    const baseline = rss(server.child.pid!)
    const expected: [Mode, RegExp][] = [
      ['endless lines', new RegExp(`the server's reply ran past ${MAX_REPLY_LINES} lines; connection dropped`)],
      ['line without end', new RegExp(`the server's reply ran past ${MAX_REPLY_LENGTH} bytes; connection dropped`)],
      ['10 MB line', new RegExp(`^the server's reply ran past ${MAX_REPLY_LENGTH} bytes; connection dropped$`)],
    ]
    for (const [m, response] of expected) {
      const { row, peak, pings } = await attempt(m)
      expect(row, m).toMatchObject({ code: null, response: expect.stringMatching(response) })
      expect(peak - baseline, m).toBeLessThan(150 * 1024 * 1024)
      expect(new Set(pings), m).toEqual(new Set([200]))
    }
    // A reply within the bounds is kept in the log up to MAX_STORED_RESPONSE characters.
    const { row } = await attempt('long reply')
    expect(row.code).toBe(451)
    expect(row.response).toBe(
      `${`${`451-4.3.0 ${'y'.repeat(900)}\n`.repeat(60)}451 4.3.0 try again later`.slice(0, MAX_STORED_RESPONSE)} [cut]`,
    )
    expect(server.child.exitCode).toBeNull()
  })
})

// A destination that takes each message and never answers its final dot: the reply that comes is
// to the next MAIL, pipelined with the dot, and must not be logged as the message's.
describe('system: a destination MX that never answers the end of data', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it('logs no message delivered: each is deferred, and delivered on the retry once the MX answers', async () => {
    const mx = await startMuteMx()
    mx.state.mute = 'lying'
    cleanup.push(() => mx.close())
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-mute-mx-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    const server = await startMailroom({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_SMARTHOST: `127.0.0.1:${mx.port}`,
      MAILROOM_DELIVERY_TIMEOUT: '2s',
      MAILROOM_RETRY_SCHEDULE: '3s',
    })
    cleanup.push(() => server.child.kill('SIGKILL'))
    const api = await restOf(server)
    const txids: string[] = []
    for (let i = 0; i < 10; i++) {
      const sent = await api('/mail/send', { from: 'me@example.org', to: `r${i}@example.com`, subject: 'x', body: 'x' })
      txids.push((await sent.json()).text as string)
    }
    const rowOf = async (txid: string) =>
      (await (await api(`/mail/log?mailid=${txid}`)).json()).emails[0] as {
        delivered: number
        code: number | null
        response: string | null
      }
    // Every first attempt ends without a reply to its dot: none is logged delivered.
    const first = await waitFor(async () => {
      const rows = await Promise.all(txids.map(rowOf))
      return rows.every((r) => r.response !== null) && rows
    }, 60_000)
    expect(first.map((r) => [r.delivered, r.code])).toEqual(txids.map(() => [0, null]))
    expect(mx.state.messages).toEqual([])
    mx.state.mute = false
    const later = await waitFor(async () => {
      const rows = await Promise.all(txids.map(rowOf))
      return rows.every((r) => r.delivered === 1) && rows
    }, 60_000)
    expect(later.map((r) => r.code)).toEqual(txids.map(() => 250))
    expect(mx.state.messages.map((m) => m[0]).sort()).toEqual(txids.map((_, i) => `r${i}@example.com`).sort())
  })
})

// So is the DNS: an MX record pointing into the network mailroom runs in is not followed, unless
// the operator says that network is where the mail goes.
describe('system: an MX record pointing at a loopback address, served by dnsmasq', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it('is refused, saying why in the log, and nothing reaches the MX; with MAILROOM_ALLOW_PRIVATE_MX=true it is delivered', async () => {
    const dns = await startDnsmasq([
      '--mx-host=inside.test,mx.inside.test,10',
      '--host-record=mx.inside.test,127.0.0.1',
    ])
    cleanup.push(dns.stop)
    const sink = await startSmtpSink()
    cleanup.push(sink.stop)
    /** Sends one message to r@inside.test through a new `mailroom serve`, and returns its log row once final. */
    const send = async (env: Record<string, string>) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-private-mx-'))
      cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const server = await startMailroom({
        MAILROOM_DATA_DIR: dataDir,
        MAILROOM_DNS_SERVERS: dns.server,
        MAILROOM_MX_PORT: String(sink.port),
        ...env,
      })
      cleanup.push(() => server.child.kill('SIGKILL'))
      const api = await restOf(server)
      const sent = await api('/mail/send', {
        from: 'me@example.org',
        to: 'r@inside.test',
        subject: 'inside',
        body: 'x',
      })
      const txid = (await sent.json()).text as string
      return waitFor(async () => {
        const [row] = (await (await api(`/mail/log?mailid=${txid}`)).json()).emails
        return row?.code !== null && row
      })
    }

    expect(await send({})).toMatchObject({
      delivered: 0,
      code: 556,
      response: '5.4.4 mx.inside.test resolves only to 127.0.0.1, a loopback address: not delivered',
      mxHostname: null,
    })
    expect(sink.count()).toBe(0)

    expect(await send({ MAILROOM_ALLOW_PRIVATE_MX: 'true' })).toMatchObject({
      delivered: 1,
      code: 250,
      mxHostname: 'mx.inside.test',
    })
    expect(sink.messages().map((m) => m.to)).toEqual([['r@inside.test']])
  })
})
