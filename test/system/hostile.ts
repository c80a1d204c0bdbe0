import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import { Worker } from 'node:worker_threads'
import SMTPConnection from 'nodemailer/lib/smtp-connection'
import { SMTPServer } from 'smtp-server'
import { startMailroom, waitFor } from './peers.js'

// The hostile load, shared by test/system/hostile.test.ts (at a scale a 2-core CI machine
// takes in a minute) and `npm run bench -- hostile` (160 × 39 MB over REST, 160 × 24 MB over SMTP):
// many authenticated clients post large messages at once, through both doors, while /healthz is
// asked every 200 ms and the server's RSS is sampled. Loopback only; every request loop is bounded.

export interface HostileLoad {
  /** Clients posting to /mail/rawsend at once, and the size of each request body. */
  rest: { clients: number; bytes: number }
  /** Clients submitting over SMTP at once, and the size of each message. */
  smtp: { clients: number; bytes: number }
  /** The server's settings (the budget, the size limits). */
  env: Record<string, string>
  /** Where the server writes its log (the bench: a file), else kept in memory. */
  logFile?: string
  /** How long the sink may take to receive every acknowledged message. */
  deliveryTimeoutMs: number
}

export interface HostileOutcome {
  /** Answers by status (REST) or reply code (SMTP); `error: …` for a request that got none. */
  rest: Record<string, number>
  smtp: Record<string, number>
  /** REST 503s that came without Retry-After. */
  restWithoutRetryAfter: number
  /** /healthz samples: how many, the slowest, and those not answered 200 within a second. */
  /** `failed`: samples not answered 200; `late`: those and the ones answered in a second or more. */
  healthz: { samples: number; worstMs: number; late: number; failed: number }
  /** The server's peak RSS (VmHWM) and its RSS when idle before the load, in bytes. */
  peakRss: number
  idleRss: number
  /** Whether the server process was still running once the load was over. */
  alive: boolean
  /** Messages acknowledged (REST 200, SMTP 250), and how often each reached the sink. */
  acknowledged: string[]
  sunk: Map<string, number>
  seconds: number
}

const rss = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

/** One line of a message's body: 78 characters and CRLF. */
const LINE = `${'x'.repeat(78)}\r\n`
/** The body's lines, shared by every client (1 MB), as they travel: raw over SMTP, a JSON string over REST. */
const RAW_FILLER = Buffer.from(LINE.repeat(13_000))
const JSON_FILLER = Buffer.from(JSON.stringify(LINE.repeat(13_000)).slice(1, -1))

const head = (id: string) =>
  `From: load@hostile.example\r\nTo: sink@hostile.example\r\nSubject: hostile ${id}\r\nX-Hostile-Id: ${id}\r\n\r\n`

/** A message of about `bytes`: its head, then the shared filler as many times as it takes, streamed. */
export function pieces(first: Buffer, filler: Buffer, bytes: number, last = Buffer.alloc(0)) {
  const count = Math.max(1, Math.round((bytes - first.length - last.length) / filler.length))
  return {
    length: first.length + count * filler.length + last.length,
    stream: () => fillerStream(first, filler, count, last),
  }
}

/** What a client writes in one turn of the event loop. */
const SLICE = 64 * 1024

/**
 * The message as a stream that yields to the event loop after each 64 KB. Hundreds of clients
 * share this one process: a source that pushes synchronously is drained in a single turn as long
 * as the socket takes the bytes, and over loopback, with the server reading on the other core, it
 * takes a whole 24 MB message. Client after client did so, which held this process's event loop
 * for 10-16 s at a time: the other clients sent nothing meanwhile, some for over a minute (the
 * server's idle timeout closed them, `421 Timeout`), and some did not answer the greeting within
 * the server's deadline to authenticate. Real clients are processes of their own.
 */
function fillerStream(first: Buffer, filler: Buffer, count: number, last: Buffer): Readable {
  const slices = function* () {
    yield first
    for (let n = 0; n < count; n++)
      for (let at = 0; at < filler.length; at += SLICE) yield filler.subarray(at, at + SLICE)
    if (last.length) yield last
  }
  const next = slices()
  return new Readable({
    read() {
      setImmediate(() => {
        const slice = next.next()
        this.push(slice.done ? null : slice.value)
      })
    },
  })
}

/** A real SMTP server standing in for the smarthost: it reads each message, keeps only its X-Hostile-Id, and counts it. */
async function startCountingSink() {
  const sunk = new Map<string, number>()
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    hideSTARTTLS: true,
    logger: false,
    closeTimeout: 100,
    onData(stream, _session, callback) {
      let start = ''
      stream.on('data', (chunk: Buffer) => {
        if (start.length < 8192) start += chunk.toString('latin1', 0, 8192)
      })
      stream.on('end', () => {
        const id = /^X-Hostile-Id: (\S+)/m.exec(start)?.[1] ?? 'unmarked'
        sunk.set(id, (sunk.get(id) ?? 0) + 1)
        callback(null, 'Ok')
      })
    },
  })
  server.on('error', () => {})
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return {
    port: (server.server.address() as AddressInfo).port,
    sunk,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** POST /mail/rawsend with a streamed JSON body; resolves with the status (or the error) and Retry-After. */
function postRaw(port: number, apiKey: string, id: string, bytes: number) {
  const body = pieces(
    Buffer.from(`{"raw_email":${JSON.stringify(head(id)).slice(0, -1)}`),
    JSON_FILLER,
    bytes,
    Buffer.from('"}'),
  )
  return new Promise<{ answer: string; retryAfter?: string }>((resolve) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/mail/rawsend',
      headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json', 'Content-Length': body.length },
    })
    const source = body.stream()
    req.on('response', (res) => {
      // A refusal may come before the whole body went out: the rest is not sent.
      source.unpipe(req)
      source.destroy()
      res.resume()
      res.on('end', () => resolve({ answer: String(res.statusCode), retryAfter: res.headers['retry-after'] }))
      res.on('error', (err) => resolve({ answer: `error: ${err.message}` }))
    })
    req.on('error', (err) => resolve({ answer: `error: ${err.message}` }))
    source.pipe(req)
  })
}

/** One SMTP submission (AUTH PLAIN, no TLS) from its own loopback address; resolves with the reply code (or the error). */
function submit(port: number, user: string, pass: string, id: string, bytes: number, i: number) {
  const message = pieces(Buffer.from(head(id)), RAW_FILLER, bytes)
  const conn = new SMTPConnection({
    host: '127.0.0.1',
    port,
    // Each client from an address of its own, as many clients would be: none is held back by
    // MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS.
    localAddress: `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`,
    ignoreTLS: true,
    connectionTimeout: 60_000,
    greetingTimeout: 60_000,
    socketTimeout: 300_000,
  })
  /** The reply code when it is one of the expected ones (452: a declared SIZE refused at MAIL FROM), else the whole reply or the error. */
  const answerOf = (err: (Error & { responseCode?: number; response?: string }) | null) =>
    !err
      ? '250'
      : err.responseCode === 451 || err.responseCode === 452
        ? String(err.responseCode)
        : (err.response ?? `error: ${err.message}`)
  return new Promise<{ answer: string }>((resolve) => {
    conn.once('error', (err: Error) => resolve({ answer: answerOf(err) }))
    conn.connect(() =>
      conn.login({ user, pass }, (err) => {
        if (err) return resolve({ answer: answerOf(err) })
        // Every other client declares its size (RFC 1870 SIZE=), the others do not.
        const envelope = {
          from: 'load@hostile.example',
          to: ['sink@hostile.example'],
          ...(i % 2 ? {} : { size: message.length }),
        }
        conn.send(envelope, message.stream(), (err2) => {
          resolve({ answer: answerOf(err2) })
          conn.quit()
        })
      }),
    )
  })
}

/**
 * Asks /healthz every 200 ms from a thread of its own (the load's clients in this thread must not
 * delay the measurement), each answer given 10 s; posts the samples back when told to stop.
 */
function startHealthProbe(url: string) {
  const worker = new Worker(
    `
    const { parentPort, workerData } = require('node:worker_threads')
    const http = require('node:http')
    let stop = false
    parentPort.on('message', () => { stop = true })
    const once = () => new Promise((resolve) => {
      const t0 = performance.now()
      const req = http.get(workerData.url, { agent: false, timeout: 10000 }, (res) => {
        res.resume()
        res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode }))
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', () => resolve({ ms: performance.now() - t0, status: 0 }))
    })
    ;(async () => {
      const samples = []
      while (!stop) {
        samples.push(await once())
        await new Promise((r) => setTimeout(r, 200))
      }
      parentPort.postMessage(samples)
    })()
    `,
    { eval: true, workerData: { url } },
  )
  return {
    stop: () =>
      new Promise<{ ms: number; status: number }[]>((resolve) => {
        worker.once('message', (samples) => {
          void worker.terminate()
          resolve(samples)
        })
        worker.postMessage('stop')
      }),
  }
}

const tally = (answers: string[]) => {
  const out: Record<string, number> = {}
  for (const a of answers) out[a] = (out[a] ?? 0) + 1
  return out
}

/** Runs the load against a new `mailroom serve` over `dataDir`; stops the server and the sink before it resolves. */
export async function runHostileLoad(dataDir: string, load: HostileLoad): Promise<HostileOutcome> {
  const sink = await startCountingSink()
  const server = await startMailroom(
    {
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false',
      ...load.env,
    },
    load.logFile ? { logFile: load.logFile } : {},
  )
  const pid = server.child.pid!
  try {
    const banner = await waitFor(async () => /Try it/.test(server.output()) && server.output())
    const apiKey = /API key \(shown only now\): (\S+)/.exec(banner)![1]
    const user = /SMTP username: +(\S+)/.exec(banner)![1]
    const pass = /SMTP password: +(\S+)/.exec(banner)![1]
    const idleRss = rss(pid, 'VmRSS')
    const probe = startHealthProbe(`http://127.0.0.1:${server.httpPort}/healthz`)
    const started = Date.now()
    const [rest, smtp] = await Promise.all([
      Promise.all(
        Array.from({ length: load.rest.clients }, (_, i) => postRaw(server.httpPort, apiKey, `r${i}`, load.rest.bytes)),
      ),
      Promise.all(
        Array.from({ length: load.smtp.clients }, (_, i) =>
          submit(server.smtpPort, user, pass, `s${i}`, load.smtp.bytes, i),
        ),
      ),
    ])
    const acknowledged = [
      ...rest.flatMap((r, i) => (r.answer === '200' ? [`r${i}`] : [])),
      ...smtp.flatMap((r, i) => (r.answer === '250' ? [`s${i}`] : [])),
    ]
    // Delivered meanwhile, or soon after: the probe goes on while the queue drains.
    await waitFor(async () => acknowledged.every((id) => sink.sunk.has(id)), load.deliveryTimeoutMs).catch(() => {})
    const samples = await probe.stop()
    const seconds = (Date.now() - started) / 1000
    const alive = server.child.exitCode === null && server.child.signalCode === null
    return {
      rest: tally(rest.map((r) => r.answer)),
      smtp: tally(smtp.map((r) => r.answer)),
      restWithoutRetryAfter: rest.filter((r) => r.answer === '503' && !r.retryAfter).length,
      healthz: {
        samples: samples.length,
        worstMs: Math.max(...samples.map((s) => s.ms)),
        late: samples.filter((s) => s.status !== 200 || s.ms >= 1000).length,
        failed: samples.filter((s) => s.status !== 200).length,
      },
      peakRss: alive ? rss(pid, 'VmHWM') : Number.NaN,
      idleRss,
      alive,
      acknowledged,
      sunk: sink.sunk,
      seconds,
    }
  } finally {
    server.child.kill('SIGKILL')
    await sink.close()
  }
}
