import { serve, type ServerType } from '@hono/node-server'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { TOOLS } from '../../tools/index.js'
import { openDataDir } from '../../storage/sqlite/index.js'
import { createTestEnv, runCli, type TestEnv } from '../helpers.js'
import { startSink } from '../relay/sink.js'

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
