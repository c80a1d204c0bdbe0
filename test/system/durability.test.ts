import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { RawSmtp } from '../relay/submission-client.js'
import { createTestDatabase, describePostgres } from '../storage/postgres.js'
import { startMailroom, startSmtpSink, waitFor } from './peers.js'

// An acknowledgement only after the data is durable: the client kills the server (kill -9) the
// moment an acknowledgement arrives, in the handler that receives it, and every message it heard
// acknowledged is in the log once the server is started again. An engine that answered before its
// commit would lose some: the commit of a large message takes longer than the answer's way back.

/**
 * Kills per door, each during SENDS concurrent sends of BODY_BYTES each. An engine that answered
 * before its commit is caught at nine kills in ten: three kills miss it once in a thousand runs,
 * and each kill is a restart of the server (five took a minute of the suite's CPU).
 */
const KILLS = 3
// The commit of a message this large takes longer than an answer's way back to the client: an
// answer sent before its commit reaches the client before the commit is written (caught at nine
// kills in ten and more). A third concurrent send keeps the server's main thread busier, the
// answer slower, and catches fewer.
const SENDS = 2
const BODY_BYTES = 8 * 1024 * 1024

type Server = Awaited<ReturnType<typeof startMailroom>>
/** What a send heard: the acknowledgement's transaction id, or why there was none. */
type Heard = { txid: string } | { refused: string } | { lost: true }

/**
 * POST /mail/send; `onAck` runs in the handler of the response's head, when a 200 is all that has
 * been read, before anything else can.
 */
function restSend(server: Server, apiKey: string, subject: string, onAck: () => void): Promise<Heard> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port: server.httpPort, path: '/mail/send', method: 'POST', agent: false },
      (res) => {
        if (res.statusCode === 200) onAck()
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk) => (text += chunk))
        res.on('end', () =>
          resolve(res.statusCode === 200 ? { txid: JSON.parse(text).text } : { refused: `${res.statusCode} ${text}` }),
        )
        res.on('error', () => resolve({ refused: `${res.statusCode} with its body cut: ${text}` }))
      },
    )
    req.setHeader('X-API-KEY', apiKey)
    req.setHeader('Content-Type', 'application/json')
    req.on('error', () => resolve({ lost: true }))
    req.end(JSON.stringify({ from: 'me@example.org', to: 'rcpt@example.com', subject, body: 'x'.repeat(BODY_BYTES) }))
  })
}

/** A submission over SMTP with AUTH; `onAck` runs as the 250 after DATA is read. */
async function smtpSend(
  server: Server,
  login: { user: string; password: string },
  subject: string,
  onAck: () => void,
): Promise<Heard> {
  let smtp: RawSmtp
  try {
    smtp = await RawSmtp.open(server.smtpPort)
  } catch {
    return { lost: true }
  }
  // Once the server is gone no reply comes: the connection's end answers instead.
  const closed = smtp.closed().then(() => undefined)
  const reply = (next: Promise<string>) => Promise.race([next, closed])
  try {
    if (!(await reply(smtp.greeting))?.startsWith('220')) return { lost: true }
    for (const step of [
      () => smtp.cmd('EHLO client.example'),
      () => smtp.starttls(),
      () => smtp.cmd('EHLO client.example'),
    ]) {
      const line = await reply(step())
      if (!line) return { lost: true }
      if (!/^2[25]0/.test(line)) return { refused: line }
    }
    const auth = await reply(smtp.authPlain(login.user, login.password))
    if (!auth?.startsWith('235')) return auth ? { refused: auth } : { lost: true }
    const replies = await Promise.race([
      smtp.pipeline(['MAIL FROM:<me@example.org>', 'RCPT TO:<rcpt@example.com>', 'DATA']),
      closed,
    ])
    if (!replies) return { lost: true }
    if (!replies[2].startsWith('354')) return { refused: replies.join(' / ') }
    const text = `${'x'.repeat(998)}\r\n`
    const body = text.repeat(Math.ceil(BODY_BYTES / text.length))
    const message = Buffer.from(
      `From: me@example.org\r\nTo: rcpt@example.com\r\nSubject: ${subject}\r\n\r\n${body}.\r\n`,
    )
    const queued = await Promise.race([
      // Run in the turn that reads the reply: nothing else comes between.
      smtp.data(message).then((answer) => {
        if (answer.startsWith('250')) onAck()
        return answer
      }),
      closed,
    ])
    if (!queued) return { lost: true }
    const txid = /^250 .*queued as (\S+)/.exec(queued)?.[1]
    return txid ? { txid } : { refused: queued }
  } finally {
    smtp.close()
  }
}

/**
 * The suite on one backend: `env` gives the server's environment beside its data directory (and
 * registers the cleanup of what it made).
 */
const durabilitySuite = (name: string, backendEnv: (cleanup: (() => unknown)[]) => Promise<Record<string, string>>) =>
  describe(`system: an acknowledgement only after the data is durable (${name})`, () => {
    const cleanup: (() => unknown)[] = []
    afterAll(async () => {
      for (const f of cleanup.reverse()) await f()
    })

    it(`keeps every message acknowledged when kill -9 comes at the acknowledgement (${KILLS} kills per door)`, async () => {
      const sink = await startSmtpSink()
      cleanup.push(() => sink.stop())
      const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-durable-'))
      cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const env = {
        MAILROOM_DATA_DIR: dataDir,
        MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
        ...(await backendEnv(cleanup)),
      }
      const start = async () => {
        const server = await startMailroom(env)
        cleanup.push(() => server.child.kill('SIGKILL'))
        return server
      }

      let server = await start()
      const banner = await waitFor(async () => /Try it/.test(server.output()) && server.output())
      const apiKey = /API key \(shown only now\): (\S+)/.exec(banner)![1]
      const login = {
        user: /SMTP username: +(\S+)/.exec(banner)![1],
        password: /SMTP password: +(\S+)/.exec(banner)![1],
      }
      const inLog = async (txid: string) => {
        const res = await fetch(`http://127.0.0.1:${server.httpPort}/mail/log?mailid=${txid}`, {
          headers: { 'X-API-KEY': apiKey },
        })
        return (await res.json()).total as number
      }

      for (let kill = 0; kill < 2 * KILLS; kill++) {
        const door = kill % 2 === 0 ? 'REST' : 'SMTP'
        const { child } = server
        const exited = new Promise((resolve) => child.once('exit', resolve))
        // The first acknowledgement ends the server: no await between reading it and the kill.
        const onAck = () => child.kill('SIGKILL')
        const heard = await Promise.all(
          Array.from({ length: SENDS }, (_, i) => {
            const subject = `durable ${kill}.${i}`
            return door === 'REST' ? restSend(server, apiKey, subject, onAck) : smtpSend(server, login, subject, onAck)
          }),
        )
        // Sends that all failed leave the server running: the checks below say why.
        child.kill('SIGKILL')
        await exited
        expect(heard.filter((h) => 'refused' in h)).toEqual([])
        const txids = heard.flatMap((h) => ('txid' in h ? [h.txid] : []))
        expect(txids.length, `${door} kill ${kill}: no send was acknowledged`).toBeGreaterThan(0)

        server = await start()
        for (const txid of txids) expect(await inLog(txid), `${door} kill ${kill}: ${txid} acknowledged`).toBe(1)
      }
    }, 120_000)
  })

durabilitySuite('SQLite', async () => ({}))
// The node is killed, not the database: what it acknowledged must be committed there.
await describePostgres('system: an acknowledgement only after the data is durable (PostgreSQL)', () =>
  durabilitySuite('PostgreSQL', async (cleanup) => {
    const db = await createTestDatabase()
    cleanup.push(db.drop)
    return { MAILROOM_DATABASE_URL: db.url, MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') }
  }),
)
