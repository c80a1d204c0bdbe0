import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../../storage/sqlite.js'
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
    const server = await startMailroom({ MAILROOM_DATA_DIR: dataDir, MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`, ...extra })
    cleanup.push(() => server.child.kill('SIGKILL'))
    const apiKey = /API key \(shown only now\): (\S+)/.exec(await waitFor(async () => /Try it/.test(server.output()) && server.output()))![1]
    const send = (i: number) =>
      fetch(`http://127.0.0.1:${server.httpPort}/mail/send`, {
        method: 'POST',
        headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ from: 'me@example.org', to: `r${i}@example.com`, subject: `engine ${i}`, body: `message ${i}` }),
      })
    const stop = async () => {
      server.child.kill('SIGTERM')
      await new Promise((r) => server.child.once('exit', r))
    }
    return { sink, dataDir, server, send, stop }
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
    const txids = await Promise.all(replies.map(async ({ res }) => (expect(res.status).toBe(200), (await res.json()).text as string)))
    expect(new Set(txids).size).toBe(300)
    await waitFor(async () => t.sink.count() >= 300, 60_000)
    await t.stop()
    expect(await committed(t.dataDir)).toEqual(new Set(txids))
    const subjects = t.sink.messages().map((m) => /^Subject: (.*)$/m.exec(m.text)?.[1])
    expect(subjects.sort()).toEqual(Array.from({ length: 300 }, (_, i) => `engine ${i}`).sort())
    // Both threads write to stdout: every line is one whole JSON record.
    const lines = t.server.output().split('\n').filter((l) => l.startsWith('{'))
    const records = lines.map((l) => JSON.parse(l) as { msg: string; size?: number })
    const queued = records.filter((r) => r.msg === 'message queued')
    expect(queued).toHaveLength(300)
    // The bytes moved to the engine thread; the size logged was read before they went.
    for (const r of queued) expect(r.size).toBeGreaterThan(100)
    expect(records.filter((r) => r.msg === 'delivery attempt')).toHaveLength(300)
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
  })
})
