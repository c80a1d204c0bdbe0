import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../../storage/sqlite/index.js'
import { startMailroom, startSmtpSink, waitFor } from './peers.js'

// `mailroom serve` commits accepted messages and delivers them in its engine thread: what the
// threads hand each other must neither lose nor reorder anything a client was told.
describe('system: the engine thread of mailroom serve', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function start(extra: Record<string, string> = {}) {
    const sink = await startSmtpSink()
    cleanup.push(() => sink.stop())
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-engine-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    const server = await startMailroom({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      ...extra,
    })
    cleanup.push(() => server.child.kill('SIGKILL'))
    const apiKey = /API key \(shown only now\): (\S+)/.exec(
      await waitFor(async () => /Try it/.test(server.output()) && server.output()),
    )![1]
    const send = (i: number) =>
      fetch(`http://127.0.0.1:${server.httpPort}/mail/send`, {
        method: 'POST',
        headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          from: 'me@example.org',
          to: `r${i}@example.com`,
          subject: `engine ${i}`,
          body: `message ${i}`,
        }),
      })
    const stop = async () => {
      server.child.kill('SIGTERM')
      await new Promise((r) => server.child.once('exit', r))
    }
    return { sink, dataDir, server, apiKey, send, stop }
  }

  /** The transaction ids committed in the data directory (read with a connection of its own). */
  async function committed(dataDir: string): Promise<Set<string>> {
    const store = openDataDir(dataDir)
    try {
      return new Set(store.sqlite.prepare('SELECT txid FROM messages').pluck().all() as string[])
    } finally {
      await store.close()
    }
  }

  it('commits and delivers 300 concurrent sends, each exactly once, and its log lines stay whole', async () => {
    const t = await start()
    const replies = await Promise.all(Array.from({ length: 300 }, async (_, i) => ({ i, res: await t.send(i) })))
    const txids = await Promise.all(
      replies.map(async ({ res }) => (expect(res.status).toBe(200), (await res.json()).text as string)),
    )
    expect(new Set(txids).size).toBe(300)
    await waitFor(async () => t.sink.count() >= 300, 60_000)
    // The statistics, read in a thread of their own, see what the engine committed.
    const stats = async () =>
      (
        await fetch(`http://127.0.0.1:${t.server.httpPort}/mail/stats?time=day`, { headers: { 'X-API-KEY': t.apiKey } })
      ).json()
    await waitFor(async () => (await stats()).sent === 300)
    expect(await stats()).toMatchObject({
      received: 300,
      sent: 300,
      usage: 300,
      volume: { from: { 'me@example.org': 300 } },
    })
    await t.stop()
    expect(await committed(t.dataDir)).toEqual(new Set(txids))
    const subjects = t.sink.messages().map((m) => /^Subject: (.*)$/m.exec(m.text)?.[1])
    expect(subjects.sort()).toEqual(Array.from({ length: 300 }, (_, i) => `engine ${i}`).sort())
    // Both threads write to stdout: every line is one whole JSON record.
    const lines = t.server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
    const records = lines.map((l) => JSON.parse(l) as { msg: string; size?: number })
    const queued = records.filter((r) => r.msg === 'message queued')
    expect(queued).toHaveLength(300)
    // The bytes moved to the engine thread; the size logged was read before they went.
    for (const r of queued) expect(r.size).toBeGreaterThan(100)
    expect(records.filter((r) => r.msg === 'delivery attempt')).toHaveLength(300)
  })

  it("writes the spam filter's events in the engine thread: a repeated subject and a trap, under concurrent sends", async () => {
    const t = await start()
    const api = (path: string, body?: object) =>
      fetch(`http://127.0.0.1:${t.server.httpPort}${path}`, {
        method: body ? 'POST' : 'GET',
        headers: { 'X-API-KEY': t.apiKey, 'Content-Type': 'application/json' },
        body: body && JSON.stringify(body),
      })
    const spam = (from: string, to = 'r@example.com') =>
      api('/mail/send', { from, to, subject: 'fast smtp relay', body: 'x' })
    // The threshold is counted atomically: of 10 at once, the first 5 go, the others are refused.
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () => spam('spammer@example.org').then((r) => r.status)),
    )
    expect(statuses.filter((s) => s === 200)).toHaveLength(5)
    expect(statuses.filter((s) => s === 400)).toHaveLength(5)
    // A trap added by the command line (another connection) refuses the next message to it.
    const admin = openDataDir(t.dataDir)
    await admin.traps.add('trap@example.net', Date.now())
    await admin.close()
    expect((await spam('other@example.org', 'trap@example.net')).status).toBe(400)
    const blocks = await (await api('/mail/blocks')).json()
    expect(blocks.subject).toEqual([{ from: 'spammer@example.org', subject: 'fast smtp relay' }])
    expect(blocks.mbtrap).toMatchObject([
      { from: 'other@example.org', to: 'trap@example.net', subject: 'fast smtp relay' },
    ])
    // Both senders are now blocked.
    for (const from of ['spammer@example.org', 'other@example.org'])
      expect(await (await spam(from)).text()).toMatch(/is blocked/)
  })

  it('keeps every message it answered 200 when stopped (SIGTERM) in the middle of a burst', async () => {
    const t = await start()
    const burst = Array.from({ length: 200 }, (_, i) =>
      t.send(i).then(
        async (res) => (res.status === 200 ? ((await res.json()).text as string) : null),
        () => null,
      ),
    )
    await new Promise((r) => setTimeout(r, 30))
    await t.stop()
    const ok = (await Promise.all(burst)).filter((x): x is string => x !== null)
    expect(ok.length).toBeGreaterThan(0)
    const stored = await committed(t.dataDir)
    for (const txid of ok) expect(stored.has(txid), txid).toBe(true)
    // Log lines are written in batches: those still held at the stop were written on the way out.
    const logged = new Set(
      t.server
        .output()
        .split('\n')
        .filter((l) => l.includes('"message queued"'))
        .map((l) => JSON.parse(l).txid as string),
    )
    for (const txid of ok) expect(logged.has(txid), txid).toBe(true)
  })

  it('takes a large SMTP message in the chunks it arrived in, and a transaction pipelined right after its end, both whole', async () => {
    const t = await start({ MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false' })
    const banner = t.server.output()
    const user = /SMTP username: +(\S+)/.exec(banner)![1]
    const password = /SMTP password: +(\S+)/.exec(banner)![1]
    // About 3 MB, every 50th line starting with a dot (dot-stuffed on the wire).
    const body = Array.from(
      { length: 45_000 },
      (_, i) => `${i % 50 === 0 ? '.' : ''}line ${i} ${'x'.repeat(60)}\r\n`,
    ).join('')
    const message = (n: number) => `From: me@example.org\r\nTo: r@example.com\r\nSubject: big ${n}\r\n\r\n${body}`
    const stuffed = (n: number) => message(n).replace(/^\./gm, '..')
    const envelope = 'MAIL FROM:<me@example.org>\r\nRCPT TO:<r@example.com>\r\nDATA\r\n'

    const socket = connect(t.server.smtpPort, '127.0.0.1')
    let received = ''
    const replies: string[] = []
    socket.setEncoding('latin1').on('data', (chunk: string) => {
      received += chunk
      for (let i: number; (i = received.indexOf('\r\n')) >= 0; received = received.slice(i + 2))
        if (received[3] === ' ') replies.push(received.slice(0, i))
    })
    const next = async (n: number) => {
      await waitFor(async () => replies.length >= n, 10_000)
      return replies.splice(0, n).map((r) => r.slice(0, 3))
    }
    expect(await next(1)).toEqual(['220'])
    socket.write('EHLO client.example\r\n')
    expect(await next(1)).toEqual(['250'])
    socket.write(`AUTH PLAIN ${Buffer.from(`\0${user}\0${password}`).toString('base64')}\r\n`)
    expect(await next(1)).toEqual(['235'])
    socket.write(envelope)
    expect(await next(3)).toEqual(['250', '250', '354'])
    // The second transaction follows the first message's end in the same write: smtp-server
    // reads it from the memory of the first message's last chunk.
    socket.write(`${stuffed(1)}.\r\n${envelope}`)
    expect(await next(4)).toEqual(['250', '250', '250', '354'])
    socket.write(`${stuffed(2)}.\r\nQUIT\r\n`)
    expect(await next(2)).toEqual(['250', '221'])
    socket.destroy()

    // smtp-sink writes each message as it reads it, unstuffed, with LF line ends and a blank line at the end.
    const dumped = (n: number) => t.sink.messages().find((m) => m.text.includes(`Subject: big ${n}\n`))?.text ?? ''
    const expected = (n: number) => message(n).replace(/\r\n/g, '\n')
    for (const n of [1, 2]) {
      await waitFor(async () => dumped(n).endsWith(`${expected(n).slice(-100)}\n`), 30_000)
      expect(dumped(n).slice(dumped(n).indexOf('From: me@example.org'))).toBe(`${expected(n)}\n`)
    }
  })
})
