import { serve, type ServerType } from '@hono/node-server'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createSocket } from 'node:dgram'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../../storage/sqlite/index.js'
import { TOOLS } from '../../tools/index.js'
import { createTestEnv, runCli, type TestEnv } from '../helpers.js'
import { startSink } from '../relay/sink.js'
import { expectNothingQueued } from '../tools/support.js'

// `mailroom stdio` as a desktop assistant starts it: the package's bin (built by `npm test`).
const BIN = fileURLToPath(new URL('../../bin/mailroom.js', import.meta.url))

/** How long a test may wait on the stdio servers it starts: each loads the whole product, many seconds on a busy machine. */
const PROCESS_WAIT = 120_000

describe('mailroom stdio', { timeout: PROCESS_WAIT }, () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  const localDataDir = async (env: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-stdio-'))
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
    const cli = async (...args: string[]) =>
      JSON.parse((await runCli([...args, '--json'], { MAILROOM_DATA_DIR: dir, ...env })).stdout)
    const account = await cli('account', 'create')
    const order = await cli('order', 'create', '--account', String(account.id))
    return { dir, apiKey: account.apiKey as string, orderId: order.id as number, password: order.password as string }
  }

  /** A mailroom's HTTP app on a port of its own, for `stdio --url` to be a client of. */
  const remoteMailroom = async () => {
    const env: TestEnv = await createTestEnv()
    const server: ServerType = serve({ fetch: env.app.fetch, hostname: '127.0.0.1', port: 0 })
    await new Promise((r) => server.once('listening', r))
    cleanup.push(
      () => env.close(),
      () => env.app.close(),
      () => new Promise<void>((r) => server.close(() => r())),
    )
    return { env, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
  }

  const connect = async (args: string[], env: Record<string, string>) => {
    // The child's environment is the test's without any MAILROOM_API_KEY of its own, and `env`.
    const inherited = Object.entries(process.env).filter(([k, v]) => k !== 'MAILROOM_API_KEY' && v !== undefined) as [
      string,
      string,
    ][]
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'stdio', ...args],
      env: { ...Object.fromEntries(inherited), ...env },
      stderr: 'pipe',
    })
    let stderr = ''
    transport.stderr?.on('data', (d) => (stderr += d))
    const client = new Client({ name: 'desktop', version: '1' })
    await client.connect(transport)
    cleanup.push(() => client.close())
    return Object.assign(client, { stderr: () => stderr })
  }

  /** `mailroom serve` on the data directory, delivering to `smarthost`: its base URL and the process. */
  const startServe = (dir: string, smarthost: number, node: string) =>
    new Promise<{ base: string; child: ChildProcess; stopped: () => Promise<void> }>((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, 'serve'], {
        env: {
          ...process.env,
          MAILROOM_DATA_DIR: dir,
          MAILROOM_HTTP_PORT: '0',
          MAILROOM_SMTP_PORT: '0',
          MAILROOM_SMTPS_PORT: '0',
          MAILROOM_SMARTHOST: `127.0.0.1:${smarthost}`,
          MAILROOM_NODE_NAME: node,
        },
      })
      const exited = new Promise<void>((r) => child.once('exit', () => r()))
      cleanup.push(() => void child.kill('SIGKILL'))
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
        const m = /"port":(\d+).*HTTP and SMTP listening/.exec(out)
        if (m) resolve({ base: `http://localhost:${m[1]}`, child, stopped: () => exited })
      })
      child.stderr.on('data', (d) => (out += d))
      child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)))
    })

  /** A DNS server that answers nothing and counts the queries it gets. */
  const dnsRecorder = async () => {
    const socket = createSocket('udp4')
    const queries: Buffer[] = []
    socket.on('message', (m) => queries.push(m))
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r))
    cleanup.push(() => new Promise<void>((r) => socket.close(() => r())))
    return { server: `127.0.0.1:${socket.address().port}`, queries }
  }

  const send = async (client: Client, to: string, subject: string) => {
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { to, from: 'me@example.org', subject, body: 'hi' },
    })
    expect(sent.isError).toBeFalsy()
    return (sent.structuredContent as { text: string }).text
  }

  /** How many messages the data directory holds. */
  const stored = async (dir: string) => {
    const store = openDataDir(dir)
    try {
      return store.sqlite.prepare('SELECT COUNT(*) FROM messages').pluck().get()
    } finally {
      await store.close()
    }
  }

  it('serves the tools against the local data directory', async () => {
    const { dir, apiKey, orderId } = await localDataDir()
    const client = await connect([], { MAILROOM_DATA_DIR: dir, MAILROOM_API_KEY: apiKey })
    expect(client.getServerCapabilities()).toEqual({ tools: { listChanged: false } })
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 'stdio', body: 'hi' },
    })
    expect(sent.isError).toBeFalsy()
    const txid = (sent.structuredContent as { text: string }).text
    const log = await client.callTool({ name: 'viewMailLog', arguments: { mailid: txid } })
    expect(log.structuredContent).toMatchObject({
      total: 1,
      emails: [{ id: txid, user: `mb${orderId}`, subject: 'stdio' }],
    })
  })

  it('reads the order passwords the admin commands wrote with the same MAILROOM_SECRET_KEY, and makes no secret.key', async () => {
    const withKey = { MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') }
    const { dir, apiKey, orderId, password } = await localDataDir(withKey)
    const client = await connect([], { MAILROOM_DATA_DIR: dir, MAILROOM_API_KEY: apiKey, ...withKey })
    const order = await client.callTool({ name: 'getMailOrderById', arguments: { id: orderId } })
    expect(order.isError).toBeFalsy()
    expect(order.structuredContent).toMatchObject({ id: orderId, password })
    expect(existsSync(join(dir, 'secret.key'))).toBe(false)
  })

  it('serves the tools as a client of a remote mailroom (--url)', async () => {
    const { env, url } = await remoteMailroom()
    const client = await connect(['--url', url], { MAILROOM_API_KEY: env.apiKey })
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    const orders = await client.callTool({ name: 'getMailOrders', arguments: {} })
    expect(orders.structuredContent).toEqual({
      orders: [{ id: env.orderId, status: 'active', username: `mb${env.orderId}` }],
    })
    const bad = await client.callTool({ name: 'getMailOrderById', arguments: { id: 424242 } })
    expect(bad.isError).toBe(true)
    expect(JSON.parse((bad.content as { text: string }[])[0].text)).toMatchObject({ code: 404 })
  })

  it('refuses a tool name that is not a string, or arguments that are not an object, as a 400, locally and through --url', async () => {
    const { dir, apiKey } = await localDataDir()
    const { env, url } = await remoteMailroom()
    const clients = [
      await connect([], { MAILROOM_DATA_DIR: dir, MAILROOM_API_KEY: apiKey }),
      await connect(['--url', url], {
        MAILROOM_API_KEY: env.apiKey,
      }),
    ]
    for (const client of clients) {
      for (const [params, message] of [
        [{ name: 42 }, 'name: expected the name of a tool, a string'],
        [{ name: 'getMailOrders', arguments: [] }, 'arguments: expected an object of named arguments'],
      ] as const) {
        const result = await client.request({ method: 'tools/call', params } as never, CallToolResultSchema)
        expect(result).toEqual({
          isError: true,
          content: [{ type: 'text', text: JSON.stringify({ code: 400, message }) }],
        })
      }
    }
  })

  it('leaves delivery to a mailroom serve on the same data directory: it only queues, the server delivers and reports with its settings, and it looks nothing up', async () => {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    sink.state.rcptRule = (rcpt) =>
      rcpt === 'gone@example.com' ? { code: 550, message: '5.1.1 no such user' } : undefined
    const dns = await dnsRecorder()
    const { dir, apiKey } = await localDataDir()
    const serve = await startServe(dir, sink.port, 'relay-1')
    // The README's desktop configuration: a key and the data directory; no smarthost, so mail it
    // delivered itself would be looked up in DNS, at a server that records the queries.
    const client = await connect([], {
      MAILROOM_DATA_DIR: dir,
      MAILROOM_API_KEY: apiKey,
      MAILROOM_DNS_SERVERS: dns.server,
    })
    await expect
      .poll(client.stderr)
      .toContain(
        `mailroom serve at ${serve.base} (node relay-1) delivers what this process accepts, to the smarthost 127.0.0.1:${sink.port} (MAILROOM_SMARTHOST); this process only queues`,
      )
    const txid = await send(client, 'bob@example.com', 'via the server')
    const bounced = await send(client, 'gone@example.com', 'to nobody')
    // The message, and the report to its sender about the recipient refused, both by the server.
    await expect
      .poll(() => sink.messages.map((m) => m.to), { timeout: 15_000 })
      .toEqual([['bob@example.com'], ['me@example.org']])
    expect(sink.messages[0].raw.toString()).toContain('Subject: via the server')
    expect(sink.messages[1].raw.toString()).toContain('gone@example.com')
    for (const mailid of [txid, bounced]) {
      const log = await client.callTool({ name: 'viewMailLog', arguments: { mailid } })
      expect((log.structuredContent as { emails: { assigned: string }[] }).emails).toEqual([
        expect.objectContaining({ assigned: 'relay-1' }),
      ])
    }
    expect(dns.queries).toEqual([])
    expect(client.stderr()).not.toContain('delivers what it accepts itself')
  }, 120_000)

  it('delivers itself while no server runs, and hands over to a server that starts and back once it stops, saying so each time', async () => {
    const [own, servers] = [await startSink(), await startSink()]
    cleanup.push(
      () => own.close(),
      () => servers.close(),
    )
    const { dir, apiKey } = await localDataDir()
    const client = await connect([], {
      MAILROOM_DATA_DIR: dir,
      MAILROOM_API_KEY: apiKey,
      MAILROOM_SMARTHOST: `127.0.0.1:${own.port}`,
    })
    const itself = `no mailroom serve runs on the data directory ${dir} (MAILROOM_DATA_DIR): this process delivers what it accepts itself, to the smarthost 127.0.0.1:${own.port} (MAILROOM_SMARTHOST)`
    await expect.poll(client.stderr).toContain(itself)
    await send(client, 'one@example.com', 'before')
    await expect.poll(() => own.messages.length, { timeout: 15_000 }).toBe(1)

    const serve = await startServe(dir, servers.port, 'relay-1')
    await send(client, 'two@example.com', 'during')
    await expect.poll(() => servers.messages.map((m) => m.to), { timeout: 15_000 }).toEqual([['two@example.com']])
    expect(client.stderr()).toContain(
      `mailroom serve at ${serve.base} (node relay-1) delivers what this process accepts`,
    )

    // A server that stops says so in the store: the next message is this process's again.
    serve.child.kill('SIGTERM')
    await serve.stopped()
    await send(client, 'three@example.com', 'after')
    await expect
      .poll(() => own.messages.map((m) => m.to), { timeout: 15_000 })
      .toEqual([['one@example.com'], ['three@example.com']])
    expect(client.stderr().split(itself)).toHaveLength(3)
    expect(servers.messages).toHaveLength(1)
  }, 120_000)

  it('delivers itself beside the heartbeat of a server gone without a word (killed), once it is old', async () => {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const { dir, apiKey } = await localDataDir()
    const store = openDataDir(dir)
    await store.servers.beat(
      { id: 'killed', node: 'relay-1', url: 'http://localhost:8080', delivery: 'somewhere' },
      Date.now() - 60_000,
    )
    await store.close()
    const client = await connect([], {
      MAILROOM_DATA_DIR: dir,
      MAILROOM_API_KEY: apiKey,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    })
    await send(client, 'bob@example.com', 'no server')
    await expect.poll(() => sink.messages.length, { timeout: 15_000 }).toBe(1)
    expect(client.stderr()).toContain('this process delivers what it accepts itself')
    expect(client.stderr()).not.toContain('mailroom serve at')
  }, 120_000)
  /** Lists the tools of a client started with `--tools log,getMailOrders`, and refuses a send as an unknown tool. */
  const servesLogAndOrders = async (client: Client) => {
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual([
      'pingServer',
      'getMailOrders',
      'viewMailLog',
      'getMessage',
      'getMessageContent',
    ])
    const send = { to: 'b@example.com', from: 'a@example.org', subject: 's', body: 'b' }
    const refused = await client.callTool({ name: 'sendMail', arguments: send })
    expect(refused.isError).toBe(true)
    expect(JSON.parse((refused.content as { text: string }[])[0].text)).toEqual({
      code: 400,
      message: expect.stringMatching(
        /^name: no tool named sendMail in the tools this connection asked for \(log,getMailOrders\); it is in the send toolset/,
      ),
    })
    const log = await client.callTool({ name: 'viewMailLog', arguments: {} })
    expect((log.structuredContent as { total: number }).total).toBe(0)
  }

  it('serves only the toolsets and tools of --tools', async () => {
    const { dir, apiKey } = await localDataDir()
    await servesLogAndOrders(
      await connect(['--tools', 'log,getMailOrders'], { MAILROOM_DATA_DIR: dir, MAILROOM_API_KEY: apiKey }),
    )
  })

  it('passes --tools on to a remote mailroom (--url), which applies it', async () => {
    const { env, url } = await remoteMailroom()
    await servesLogAndOrders(
      await connect(['--url', url, '--tools', 'log,getMailOrders'], { MAILROOM_API_KEY: env.apiKey }),
    )
    expectNothingQueued(env)
  })

  it('refuses a --tools that names neither a toolset nor a tool at start, in one line', () => {
    const bad = spawnSync(process.execPath, [BIN, 'stdio', '--tools', 'send,everything'], {
      env: { ...process.env, MAILROOM_DATA_DIR: '/nonexistent', MAILROOM_API_KEY: 'mr_x' },
      encoding: 'utf8',
      input: '',
    })
    expect(bad.status).toBe(1)
    expect(bad.stdout).toBe('')
    expect(bad.stderr).toBe(
      "mailroom: error: option '--tools <list>' argument 'send,everything' is invalid. --tools: no toolset or tool " +
        'named everything; the toolsets are send, log, stats, orders, rules, blocks, keys, domains, webhooks, inbox, approvals, or name tools ' +
        '(sendMail, …) (see mailroom stdio --help)\n',
    )
  })

  it('delivers what it accepts while no mailroom serve runs, under leases of its own', async () => {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const { dir, apiKey, orderId } = await localDataDir()
    const client = await connect([], {
      MAILROOM_DATA_DIR: dir,
      MAILROOM_API_KEY: apiKey,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_NODE_NAME: 'desk',
    })
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 'stdio delivers', body: 'hi' },
    })
    const txid = (sent.structuredContent as { text: string }).text
    await expect.poll(() => sink.messages.map((m) => m.to), { timeout: PROCESS_WAIT }).toEqual([['bob@example.com']])
    expect(sink.messages[0].raw.toString()).toContain('Subject: stdio delivers')
    const log = await client.callTool({ name: 'viewMailLog', arguments: { mailid: txid } })
    expect(log.structuredContent).toMatchObject({
      total: 1,
      emails: [{ id: txid, user: `mb${orderId}`, delivered: 1 }],
    })
    expect((log.structuredContent as { emails: { assigned: string }[] }).emails[0].assigned).toMatch(/^desk-stdio-\d+$/)
  })

  it("sends a sandbox key's mail nowhere, and logs it delivered", async () => {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const { dir } = await localDataDir()
    const created = await runCli(['account', 'key', 'create', '--account', '1', '--sandbox', '--json'], {
      MAILROOM_DATA_DIR: dir,
    })
    const client = await connect([], {
      MAILROOM_DATA_DIR: dir,
      MAILROOM_API_KEY: JSON.parse(created.stdout).apiKey,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    })
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 'stdio sandbox', body: 'hi' },
    })
    const mailid = (sent.structuredContent as { text: string }).text
    await expect
      .poll(
        async () =>
          (
            (await client.callTool({ name: 'viewMailLog', arguments: { mailid } })).structuredContent as {
              emails: { delivered: number; code: number; mxHostname: string | null }[]
            }
          ).emails,
        { timeout: PROCESS_WAIT },
      )
      .toEqual([expect.objectContaining({ delivered: 1, code: 250, mxHostname: null })])
    expect(sink.state.connections).toBe(0)
  })

  it.each([
    ['without a key', undefined, 'MAILROOM_API_KEY is not set: set it in the MCP client'],
    ['with a wrong key', 'mr_wrong', 'MAILROOM_API_KEY is not a key of the data directory'],
  ])(
    'starts %s, and answers every tool call with an error that says how to set MAILROOM_API_KEY; nothing is sent',
    async (_, key, reason) => {
      const { dir } = await localDataDir()
      const client = await connect([], { MAILROOM_DATA_DIR: dir, ...(key ? { MAILROOM_API_KEY: key } : {}) })
      expect(client.getInstructions()).toContain(reason)
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
      for (const [name, args] of [
        ['sendMail', { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' }],
        ['getMailOrders', {}],
      ] as const) {
        const result = await client.callTool({ name, arguments: args })
        expect(result.isError).toBe(true)
        const error = JSON.parse((result.content as { text: string }[])[0].text)
        expect(error.code).toBe(401)
        expect(error.message).toContain(reason)
        expect(error.message).toContain('`mailroom account key create --account <id>` makes one')
      }
      expect(client.stderr()).toContain(reason)
      expect(await stored(dir)).toBe(0)
    },
  )

  it('as a client of a remote mailroom without a key, answers every tool call with an error that says so', async () => {
    const client = await connect(['--url', 'http://127.0.0.1:9'], {})
    const result = await client.callTool({ name: 'getMailOrders', arguments: {} })
    expect(result.isError).toBe(true)
    expect(JSON.parse((result.content as { text: string }[])[0].text)).toEqual({
      code: 401,
      message: expect.stringContaining('MAILROOM_API_KEY is not set, and a remote mailroom needs one'),
    })
  })

  it('writes nothing but JSON-RPC to stdout', async () => {
    const { dir, apiKey } = await localDataDir()
    const child = spawn(process.execPath, [BIN, 'stdio'], {
      env: { ...process.env, MAILROOM_DATA_DIR: dir, MAILROOM_API_KEY: apiKey, MAILROOM_LOG_LEVEL: 'debug' },
    })
    cleanup.push(() => void child.kill())
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const request = (id: number, method: string, params: unknown) =>
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`)
    request(1, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'raw', version: '1' },
    })
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`)
    request(2, 'tools/call', {
      name: 'sendMail',
      arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' },
    })
    await new Promise<void>((resolve) => {
      const check = () => (out.split('\n').filter(Boolean).length >= 2 ? resolve() : setTimeout(check, 50))
      check()
    })
    const lines = out.split('\n').filter(Boolean)
    for (const line of lines) expect(JSON.parse(line).jsonrpc).toBe('2.0')
    expect(JSON.parse(lines[1]).result.structuredContent.status).toBe('ok')
  })
})
