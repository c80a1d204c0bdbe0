import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTransport } from 'nodemailer'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startSink } from '../relay/sink.js'
import { createTestDatabase, describePostgres } from '../storage/postgres.js'
import { BIN, startMailroom, waitFor } from './peers.js'
import { type Node, roundRobin, startTwoNodes } from './nodes.js'

// Several `mailroom serve` processes over one PostgreSQL database share accounts, rules, the log
// and the queue: each message is delivered once, by whichever node claims it; a change made
// through one node is in force on the others within a second; an MCP session opened on one node
// is served by the other; a node killed with -9 loses nothing.

const MCP_HEADERS = {
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
  'Mcp-Protocol-Version': '2025-06-18',
}
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
}

await describePostgres('system: two nodes on one PostgreSQL database', () => {
  const cleanup: (() => unknown)[] = []
  let sink: Awaited<ReturnType<typeof startSink>>
  let a: Node
  let b: Node
  let apiKey: string
  let smtpAuth: { user: string; pass: string }
  let env: Record<string, string>

  const rest = (node: Node, path: string, body?: unknown) =>
    fetch(`http://127.0.0.1:${node.httpPort}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  const sendRest = async (node: Node, to: string, subject: string, from = 'me@example.org') => {
    const res = await rest(node, '/mail/send', { from, to, subject, body: 'x' })
    return { status: res.status, body: await res.json() }
  }
  const smtpOf = (node: Node) =>
    createTransport({
      host: '127.0.0.1',
      port: node.smtpPort,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: smtpAuth,
      pool: true,
      maxConnections: 4,
    })
  const subjectsAtSink = () =>
    sink.messages.map((m) => /^Subject: (.*)$/m.exec(m.raw.toString('latin1'))?.[1]?.trim() ?? '')

  beforeAll(async () => {
    sink = await startSink()
    cleanup.push(sink.close)
    let banner: string
    ;({ a, b, env, banner } = await startTwoNodes(sink.port, cleanup))
    apiKey = /API key \(shown only now\): (\S+)/.exec(banner)![1]
    smtpAuth = {
      user: /SMTP username: +(\S+)/.exec(banner)![1],
      pass: /SMTP password: +(\S+)/.exec(banner)![1],
    }
    expect(b.output()).not.toMatch(/first start/)
  }, 60_000)
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  it('delivers 600 messages sent alternately to both nodes over REST and SMTP, each exactly once, by both nodes', async () => {
    const smtp = { a: smtpOf(a), b: smtpOf(b) }
    const total = 600
    const send = async (i: number) => {
      const subject = `two nodes ${i}`
      const to = `r${i}@example.com`
      // REST to a, SMTP to b, REST to b, SMTP to a, and again.
      const node = i % 4 === 0 || i % 4 === 3 ? a : b
      if (i % 2 === 0) {
        const { status } = await sendRest(node, to, subject)
        expect(status).toBe(200)
      } else {
        const info = await smtp[node === a ? 'a' : 'b'].sendMail({
          from: 'me@example.org',
          to,
          subject,
          text: 'x',
        })
        expect(info.accepted).toEqual([to])
      }
    }
    for (let i = 0; i < total; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => send(i + k)))
    smtp.a.close()
    smtp.b.close()

    await waitFor(async () => sink.messages.length >= total, 60_000)
    // Nothing more arrives: no message was delivered twice.
    await new Promise((r) => setTimeout(r, 1500))
    const subjects = subjectsAtSink().filter((s) => s.startsWith('two nodes '))
    expect(subjects).toHaveLength(total)
    expect(new Set(subjects).size).toBe(total)

    const res = await rest(b, `/mail/log?limit=${2 * total}`)
    const rows = ((await res.json()) as { emails: { subject: string; assigned: string; delivered: number }[] }).emails
    const ours = rows.filter((e) => e.subject.startsWith('two nodes '))
    expect(ours).toHaveLength(total)
    expect(ours.every((e) => e.delivered === 1)).toBe(true)
    expect(new Set(ours.map((e) => e.assigned))).toEqual(new Set(['node-a', 'node-b']))
  }, 180_000)

  it('refuses on one node, within a second, a deny rule added through the other', async () => {
    const added = await rest(a, '/mail/rules', { type: 'destination', data: 'denied@example.com' })
    expect(added.status).toBe(200)
    const since = Date.now()
    const refused = await waitFor(async () => {
      const out = await sendRest(b, 'denied@example.com', 'after the rule')
      return out.status !== 200 && { ...out, after: Date.now() - since }
    }, 5_000)
    expect(refused.status).toBe(400)
    expect(refused.body.message).toMatch(
      /recipient denied@example\.com is rejected by deny rule \d+ \(destination denied@example\.com\)/,
    )
    expect(refused.after).toBeLessThan(1000)
  })

  /** The `mailroom` command with the nodes' settings (and `extra`); its exit status and output. */
  const mailroom = (args: string[], extra: Record<string, string | undefined> = {}) => {
    const out = spawnSync(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, ...extra },
      encoding: 'utf8',
    })
    return { status: out.status, stdout: out.stdout, stderr: out.stderr }
  }

  it('takes the mailroom command on the database: a trap it adds is refused by both nodes within a second', async () => {
    expect(JSON.parse(mailroom(['account', 'list', '--json']).stdout)).toMatchObject([{ id: 1, name: 'default' }])
    expect(mailroom(['trap', 'add', 'trapped@example.com']).status).toBe(0)
    const since = Date.now()
    for (const node of [a, b]) {
      const refused = await waitFor(async () => {
        const out = await sendRest(node, 'trapped@example.com', 'to a trap', `victim-${node.name}@example.org`)
        return out.status !== 200 && out
      }, 5_000)
      expect(refused.body.message).toMatch(/spam trap/)
    }
    expect(Date.now() - since).toBeLessThan(2000)
  })

  it('refuses, in the command and in a node, a database without MAILROOM_SECRET_KEY, saying how to make one', async () => {
    const out = mailroom(['account', 'list'], { MAILROOM_SECRET_KEY: undefined })
    expect(out.status).not.toBe(0)
    expect(out.stderr).toMatch(/MAILROOM_DATABASE_URL needs MAILROOM_SECRET_KEY.*openssl rand -base64 32/)
    const { MAILROOM_SECRET_KEY: _, ...withoutSecret } = env
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-node-c-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    await expect(startMailroom({ ...withoutSecret, MAILROOM_DATA_DIR: dataDir })).rejects.toThrow(
      /MAILROOM_DATABASE_URL needs MAILROOM_SECRET_KEY.*openssl rand -base64 32/,
    )
    const wrong = mailroom(['account', 'list'], { MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') })
    expect(wrong.stderr).toMatch(/MAILROOM_SECRET_KEY does not decrypt .* PostgreSQL database/)
  })

  it('refuses an admin command on a database that mailroom never opened, and creates nothing there', async () => {
    const empty = await createTestDatabase()
    try {
      const out = mailroom(['account', 'list'], { MAILROOM_DATABASE_URL: empty.url })
      expect(out.status).not.toBe(0)
      expect(out.stderr).toMatch(/no mailroom database in the PostgreSQL database mailroom_test_\w+ on 127\.0\.0\.1/)
    } finally {
      await empty.drop()
    }
  })

  it('counts a spam-indicative subject across nodes: of six sent alternately, five go and the sixth is refused', async () => {
    const outcomes: number[] = []
    for (let i = 0; i < 6; i++)
      outcomes.push(
        (await sendRest(i % 2 ? b : a, `s${i}@example.com`, 'cheap socks5 proxies', 'spammer@example.org')).status,
      )
    expect(outcomes).toEqual([200, 200, 200, 200, 200, 400])
  })

  /** A JSON-RPC message POSTed straight to a node's /mcp with `key`, in session `sessionId` if given. */
  const mcpPost = (node: Node, key: string, message: unknown, sessionId?: string) =>
    fetch(`http://127.0.0.1:${node.httpPort}/mcp`, {
      method: 'POST',
      headers: { ...MCP_HEADERS, 'X-API-KEY': key, ...(sessionId ? { 'Mcp-Session-Id': sessionId } : {}) },
      body: JSON.stringify(message),
    })

  it('serves an MCP session opened on one node from the other, behind a round-robin proxy, and ends it on both', async () => {
    const proxy = await roundRobin([a, b])
    cleanup.push(proxy.close)
    const transport = new StreamableHTTPClientTransport(proxy.url, {
      requestInit: { headers: { 'X-API-KEY': apiKey } },
    })
    const client = new Client({ name: 'two-nodes', version: '1.0.0' })
    cleanup.push(() => client.close())
    await client.connect(transport)
    const sessionId = transport.sessionId!
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/)
    // Once initialized, the client asks for the server's stream (a GET) without waiting for it.
    await waitFor(async () => proxy.served[2]?.status)

    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('sendMail')
    await client.ping()
    const subject = 'one MCP session, two nodes'
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'mcp@example.com', from: 'me@example.org', subject, body: 'x' },
    })
    expect(sent.isError, JSON.stringify(sent.content)).toBeFalsy()
    const txid = (sent.structuredContent as { text: string }).text
    const log = await client.callTool({ name: 'viewMailLog', arguments: { mailid: txid } })
    expect((log.structuredContent as { emails: { subject: string }[] }).emails).toMatchObject([{ subject }])
    await transport.terminateSession()

    expect(proxy.served).toEqual([
      { node: 'node-a', method: 'POST', rpc: 'initialize', status: 200 },
      { node: 'node-b', method: 'POST', rpc: 'notifications/initialized', status: 202 },
      // No node opens a stream: neither holds anything of the session a client would wait for.
      { node: 'node-a', method: 'GET', rpc: '', status: 405 },
      { node: 'node-b', method: 'POST', rpc: 'tools/list', status: 200 },
      { node: 'node-a', method: 'POST', rpc: 'ping', status: 200 },
      { node: 'node-b', method: 'POST', rpc: 'tools/call', status: 200 },
      { node: 'node-a', method: 'POST', rpc: 'tools/call', status: 200 },
      { node: 'node-b', method: 'DELETE', rpc: '', status: 200 },
    ])
    await waitFor(async () => subjectsAtSink().includes(subject))
    // Ended through one node, the session is gone on both.
    for (const node of [a, b]) {
      const res = await mcpPost(node, apiKey, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, sessionId)
      expect(res.status, node.name).toBe(404)
      expect((await res.json()).error).toEqual({ code: -32001, message: 'Session not found' })
    }
  })

  it("answers another account's key 404 for a session, on either node, and sends nothing", async () => {
    const other = JSON.parse(mailroom(['account', 'create', '--name', 'other', '--json']).stdout) as {
      id: number
      apiKey: string
    }
    // With an active order of its own, nothing but the session would stop its send.
    expect(mailroom(['order', 'create', '--account', String(other.id)]).status).toBe(0)
    const init = await mcpPost(a, apiKey, INITIALIZE)
    expect(init.status).toBe(200)
    const sessionId = init.headers.get('mcp-session-id')!
    const subject = 'through a session not its own'
    const send = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'sendMail', arguments: { to: 'x@example.com', from: 'me@example.org', subject, body: 'x' } },
    }
    for (const node of [a, b]) {
      const res = await mcpPost(node, other.apiKey, send, sessionId)
      expect(res.status, node.name).toBe(404)
      expect((await res.json()).error).toEqual({ code: -32001, message: 'Session not found' })
    }
    const logOf = async (key: string) =>
      (
        (await (
          await fetch(`http://127.0.0.1:${b.httpPort}/mail/log?limit=1000`, { headers: { 'X-API-KEY': key } })
        ).json()) as { emails: { subject: string }[] }
      ).emails.filter((e) => e.subject === subject)
    expect(await logOf(other.apiKey)).toEqual([])
    expect(await logOf(apiKey)).toEqual([])
    expect(subjectsAtSink()).not.toContain(subject)
    // The session is still its owner's, on both nodes.
    for (const node of [a, b])
      expect((await mcpPost(node, apiKey, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, sessionId)).status).toBe(200)
  })

  it('delivers, from the other node, every message a node killed with -9 had accepted', async () => {
    // A slow destination holds the first node's deliveries in flight when it dies.
    let release!: () => void
    sink.state.hold = new Promise<void>((r) => (release = r))
    const before = sink.messages.length
    const accepted: string[] = []
    for (let i = 0; i < 20; i++) {
      const { status, body } = await sendRest(a, `k${i}@example.com`, `killed ${i}`)
      expect(status).toBe(200)
      accepted.push(body.text)
    }
    // a holds them: the sink has some of them waiting for its reply, the rest are leased to a.
    await waitFor(async () => sink.state.received > 0)
    a.child.kill('SIGKILL')
    await new Promise((r) => a.child.once('exit', r))
    sink.state.hold = undefined
    release()
    // b takes a's leases once they are MAILROOM_LEASE_TIMEOUT (5 s) old, and delivers them.
    await waitFor(async () => {
      const delivered = new Set(subjectsAtSink().filter((s) => s.startsWith('killed ')))
      return delivered.size === accepted.length
    }, 30_000)
    expect(sink.messages.length).toBeGreaterThanOrEqual(before + accepted.length)
    // No reply reached the killed node before it died: every one was delivered by the other.
    for (const txid of accepted) {
      const row = await waitFor(async () => {
        const [r] = (await (await rest(b, `/mail/log?mailid=${txid}`)).json()).emails
        return r?.delivered === 1 && r
      })
      expect(row, txid).toMatchObject({ delivered: 1, assigned: 'node-b' })
    }
  }, 60_000)
})
