import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Config } from '../../config.js'
import type { RunningServer } from '../../serve.js'
import { createAccount, createOrder } from '../../accounts.js'
import { openRuntime } from '../../runtime.js'
import { IDEMPOTENCY_WINDOW_MS } from '../../tools/idempotency.js'
import { mcpClient, restartTestServer, silentLogger, startTestServer } from '../helpers.js'
import { startSink } from '../relay/sink.js'

// `mailroom serve` in process, delivering to a real SMTP sink: what an agent that retries a send
// (over REST or MCP, after a lost connection or a restart of the server) gets, and what is sent.
describe('idempotency keys, end to end', () => {
  let sink: Awaited<ReturnType<typeof startSink>>
  let server: RunningServer
  let config: Config
  let dataDir: string
  let apiKey: string
  let base: string
  const clients: Client[] = []

  beforeEach(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-idem-', { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    ;({ server, config, dataDir, apiKey } = started)
    base = `http://127.0.0.1:${server.httpPort}`
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
    await server.stop()
    await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const rest = (path: string, body: unknown, key?: string, account = apiKey) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        'X-API-KEY': account,
        'Content-Type': 'application/json',
        ...(key === undefined ? {} : { 'Idempotency-Key': key }),
      },
      body: JSON.stringify(body),
    })
  const mcp = async (account = apiKey) => {
    const client = await mcpClient(base, account)
    clients.push(client)
    return client
  }
  const mail = (subject: string) => ({ from: 'me@example.org', to: 'bob@example.com', subject, body: 'hello' })
  /** The messages with this subject that reached the sink, once every one the log holds was delivered. */
  const arrived = async (subject: string, account = apiKey) => {
    const log = async () =>
      (
        await (
          await fetch(`${base}/mail/log?subject=${encodeURIComponent(subject)}`, { headers: { 'X-API-KEY': account } })
        ).json()
      ).emails as { id: string; delivered: number }[]
    await expect
      .poll(async () => (await log()).every((e) => e.delivered === 1), { timeout: 15_000, interval: 100 })
      .toBe(true)
    return {
      logged: (await log()).map((e) => e.id),
      sunk: sink.messages.filter((m) => m.raw.includes(`Subject: ${subject}`)),
    }
  }

  it('REST: the same key twice sends one message and answers the same transaction id', async () => {
    const first = await rest('/mail/send', mail('rest twice'), 'order-1001')
    const second = await rest('/mail/send', mail('rest twice'), 'order-1001')
    expect([first.status, second.status]).toEqual([200, 200])
    const answer = await first.json()
    expect(await second.json()).toEqual(answer)
    const { logged, sunk } = await arrived('rest twice')
    expect(logged).toEqual([answer.text])
    expect(sunk).toHaveLength(1)
  })

  it('MCP: the same idempotencyKey twice sends one message, as does a REST retry of it', async () => {
    const client = await mcp()
    const args = { ...mail('mcp twice'), idempotencyKey: 'task-7/send' }
    const first = await client.callTool({ name: 'sendMail', arguments: args })
    expect(first.isError).toBeFalsy()
    const second = await (await mcp()).callTool({ name: 'sendMail', arguments: args })
    expect(second.structuredContent).toEqual(first.structuredContent)
    const overRest = await rest('/mail/send', mail('mcp twice'), 'task-7/send')
    expect(await overRest.json()).toEqual(first.structuredContent)
    const { sunk } = await arrived('mcp twice')
    expect(sunk).toHaveLength(1)
  })

  it('a different body with the key is a 422 over both doors, and sends nothing', async () => {
    const answer = await (await rest('/mail/advsend', mail('the first'), 'k-422')).json()
    const other = await rest('/mail/advsend', mail('another'), 'k-422')
    expect(other.status).toBe(422)
    expect(await other.json()).toEqual({
      code: 422,
      message: expect.stringMatching(/^idempotency key: already used within 24 hours for a different request/),
    })
    const viaMcp = await (await mcp()).callTool({
      name: 'sendAdvMail',
      arguments: { ...mail('another'), idempotencyKey: 'k-422' },
    })
    expect(viaMcp.isError).toBe(true)
    expect(JSON.parse((viaMcp.content as { text: string }[])[0].text)).toMatchObject({ code: 422 })
    expect((await arrived('the first')).logged).toEqual([answer.text])
    expect((await arrived('another')).logged).toEqual([])
    expect(sink.messages).toHaveLength(1)
  })

  it('a restart of the server in between changes nothing; expired keys are swept at the start', async () => {
    const raw = 'From: me@example.org\r\nTo: bob@example.com\r\nSubject: across a restart\r\n\r\nbody\r\n'
    const answer = await (await rest('/mail/rawsend', { raw_email: raw }, 'k-restart')).json()
    await rest('/mail/send', mail('old'), 'k-old')
    await arrived('across a restart')
    await server.stop()
    // A day later for one key: the start's housekeeping sweeps it.
    const db = new Database(join(dataDir, 'mailroom.db'))
    db.prepare('UPDATE idempotency_keys SET created_at = created_at - ? WHERE key = ?').run(
      IDEMPOTENCY_WINDOW_MS,
      'k-old',
    )
    db.close()
    server = await restartTestServer(config)
    base = `http://127.0.0.1:${server.httpPort}`
    const again = await rest('/mail/rawsend', { raw_email: raw }, 'k-restart')
    expect(again.status).toBe(200)
    expect(await again.json()).toEqual(answer)
    const check = new Database(join(dataDir, 'mailroom.db'), { readonly: true })
    expect(check.prepare('SELECT key FROM idempotency_keys').pluck().all()).toEqual(['k-restart'])
    check.close()
    expect((await arrived('across a restart')).sunk).toHaveLength(1)
  })

  it('concurrent requests with one key send once; the others get 409 or the replay', async () => {
    // Connected first, so that the sends themselves go at once.
    const agents = await Promise.all([mcp(), mcp(), mcp()])
    const answers = await Promise.all([
      ...agents.map((client) => mcpSend('k-race', 'at once', client)),
      ...agents.map(() => restSend('k-race', 'at once')),
    ])
    const ok = answers.filter((a) => a.status === 200)
    expect(ok.length).toBeGreaterThanOrEqual(1)
    expect(answers.every((a) => a.status === 200 || a.status === 409)).toBe(true)
    expect(new Set(ok.map((a) => a.text)).size).toBe(1)
    const { logged, sunk } = await arrived('at once')
    expect(logged).toEqual([ok[0].text])
    expect(sunk).toHaveLength(1)
  })
  /** A send over MCP, as a status and transaction id. */
  async function mcpSend(key: string, subject: string, client?: Client): Promise<{ status: number; text?: string }> {
    const result = await (client ?? (await mcp())).callTool({
      name: 'sendMail',
      arguments: { ...mail(subject), idempotencyKey: key },
    })
    if (result.isError) return { status: JSON.parse((result.content as { text: string }[])[0].text).code }
    return { status: 200, text: (result.structuredContent as { text: string }).text }
  }
  /** A send over REST, as a status and transaction id. */
  async function restSend(key: string, subject: string): Promise<{ status: number; text?: string }> {
    const res = await rest('/mail/send', mail(subject), key)
    const body = await res.json()
    return { status: res.status, text: res.status === 200 ? body.text : undefined }
  }

  it('a refusal is not remembered: the corrected request sends under the same key', async () => {
    const refused = await rest('/mail/send', { ...mail('corrected'), to: 'bob@' }, 'k-fix')
    expect(refused.status).toBe(400)
    const viaMcp = await mcpSend('k-fix', 'corrected')
    expect(viaMcp.status).toBe(200)
    expect((await arrived('corrected')).logged).toEqual([viaMcp.text])
  })

  it('a bad key is a 400 naming the header or the argument, and nothing is sent', async () => {
    for (const [key, what] of [
      ['', 'is empty'],
      ['k'.repeat(256), 'is 256 characters long'],
      ['k\ty', 'holds U+0009 at position 2'],
    ]) {
      const res = await rest('/mail/send', mail('bad key'), key)
      expect(res.status, JSON.stringify(key)).toBe(400)
      expect((await res.json()).message).toBe(`Idempotency-Key: ${what}; a key is 1 to 255 printable ASCII characters`)
    }
    const client = await mcp()
    for (const [key, what] of [
      ['', 'is empty'],
      ['\u0000x', 'holds U+0000 at position 1'],
      [7, 'expected a string'],
    ] as const) {
      const result = await client.callTool({ name: 'rawMail', arguments: { raw_email: 'x', idempotencyKey: key } })
      expect(result.isError).toBe(true)
      expect(JSON.parse((result.content as { text: string }[])[0].text)).toEqual({
        code: 400,
        message: `idempotencyKey: ${what}; a key is 1 to 255 printable ASCII characters`,
      })
    }
    // Tools that send nothing take no key.
    const rules = await client.callTool({ name: 'getRules', arguments: { idempotencyKey: 'k' } })
    expect(JSON.parse((rules.content as { text: string }[])[0].text).message).toMatch(
      /^idempotencyKey: getRules has no argument/,
    )
    expect((await arrived('bad key')).logged).toEqual([])
  })

  it("a sandbox key's use of a key never answers the account's real send with it", async () => {
    const admin = await openRuntime(config, { logger: silentLogger })
    const { key: sandboxKey } = await admin.store.apiKeys.create(1, Date.now(), { sandbox: true })
    await admin.close()
    await expect.poll(async () => (await rest('/mail/send', mail('rehearsed'), 'k-both', sandboxKey)).status).toBe(200)
    const rehearsal = await (await rest('/mail/send', mail('rehearsed'), 'k-both', sandboxKey)).json()
    const real = await rest('/mail/send', mail('rehearsed'), 'k-both')
    expect(real.status).toBe(200)
    const sent = await real.json()
    expect(sent.text).not.toBe(rehearsal.text)
    // Each kind of key still replays its own answer.
    expect(await (await rest('/mail/send', mail('rehearsed'), 'k-both')).json()).toEqual(sent)
    expect(await (await rest('/mail/send', mail('rehearsed'), 'k-both', sandboxKey)).json()).toEqual(rehearsal)
    const { logged, sunk } = await arrived('rehearsed')
    expect(logged.sort()).toEqual([rehearsal.text, sent.text].sort())
    expect(sunk).toHaveLength(1)
  })

  it("another account's same key is independent", async () => {
    const admin = await openRuntime(config, { logger: silentLogger })
    const other = await createAccount(admin, 'other')
    await createOrder(admin, other.account.id, null, [])
    await admin.close()
    const ours = await (await rest('/mail/send', mail('ours'), 'k-shared')).json()
    // A new key is in force within a second of its creation (the settings cache).
    await expect.poll(async () => (await rest('/mail/send', mail('theirs'), 'k-shared', other.apiKey)).status).toBe(200)
    const theirs = await (await rest('/mail/send', mail('theirs'), 'k-shared', other.apiKey)).json()
    expect(theirs.text).not.toBe(ours.text)
    expect(await (await rest('/mail/send', mail('ours'), 'k-shared')).json()).toEqual(ours)
    expect((await arrived('ours')).sunk).toHaveLength(1)
    expect((await arrived('theirs', other.apiKey)).sunk).toHaveLength(1)
  })
})
