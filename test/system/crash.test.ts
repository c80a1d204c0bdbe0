import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { startMailroom, startSmtpSink, waitFor } from './peers.js'

// Nothing accepted is ever lost: kill -9 the server while messages are in flight, start it
// again, and every accepted transaction id reaches the sink.
describe('system: crash and restart', () => {
  const cleanup: (() => unknown)[] = []
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  it('delivers every accepted message after kill -9', async () => {
    // A slow sink (1 s per reply) keeps transactions in flight when the kill comes.
    const sink = await startSmtpSink(['-w', '1'])
    cleanup.push(() => sink.stop())
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-crash-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    const env = {
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_NODE_NAME: 'crash-node',
    }

    const first = await startMailroom(env)
    const apiKey = /API key \(shown only now\): (\S+)/.exec(
      await waitFor(async () => /Try it/.test(first.output()) && first.output()),
    )![1]
    const base = (port: number) => `http://127.0.0.1:${port}`
    const accepted: string[] = []
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${base(first.httpPort)}/mail/send`, {
        method: 'POST',
        headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ from: 'me@example.org', to: `r${i}@example.com`, subject: `crash ${i}`, body: 'x' }),
      })
      expect(res.status).toBe(200)
      accepted.push((await res.json()).text)
    }
    first.child.kill('SIGKILL')
    await new Promise((r) => first.child.once('exit', r))
    const deliveredBefore = sink.messages().length
    expect(deliveredBefore).toBeLessThan(accepted.length)

    const second = await startMailroom(env)
    cleanup.push(() => second.child.kill('SIGKILL'))
    await waitFor(async () => {
      const log = await (
        await fetch(`${base(second.httpPort)}/mail/log?delivered=0`, { headers: { 'X-API-KEY': apiKey } })
      ).json()
      return log.total === 0
    }, 60_000)
    const received = new Set(sink.messages().map((m) => /^Subject: (crash \d+)/m.exec(m.text)?.[1]))
    for (let i = 0; i < accepted.length; i++)
      expect(received.has(`crash ${i}`), `crash ${i} (${accepted[i]})`).toBe(true)
    const log = await (
      await fetch(`${base(second.httpPort)}/mail/log?limit=100`, { headers: { 'X-API-KEY': apiKey } })
    ).json()
    expect(log.total).toBe(accepted.length)
    expect(new Set(log.emails.map((e: { id: string }) => e.id))).toEqual(new Set(accepted))
  })
})
