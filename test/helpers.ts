import { serve } from '@hono/node-server'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { randomBytes } from 'node:crypto'
import fs, { mkdtempSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { loadConfig, type Config } from '../config.js'
import { createAccount, createOrder } from '../accounts.js'
import { createServices } from '../runtime.js'
import type * as cliSources from '../cli/index.js'
import type * as serveSources from '../serve.js'
import { openDataDir, openSqliteStore } from '../storage/sqlite/index.js'
import type { Services, ToolContext } from '../tools/define.js'
import { createHttpApp, HTTP_SERVE_OPTIONS } from '../transports/http.js'

export const silentLogger = pino({ level: 'silent' })

// `mailroom serve` as built, in its production layout: its relay engine runs in a worker thread,
// which loads JavaScript only, so the server is not started from the sources.
export const { startServer } = (await import(new URL('../dist/serve.js', import.meta.url).href)) as typeof serveSources

// The `mailroom` command as built: what bin/mailroom.js runs.
const { main } = (await import(new URL('../dist/cli/index.js', import.meta.url).href)) as typeof cliSources

/** A controllable clock for tests. */
export function testClock(start = Date.UTC(2026, 10, 22, 12, 0, 0)) {
  let now = start
  const clock = () => now
  return Object.assign(clock, { set: (ms: number) => void (now = ms), advance: (ms: number) => void (now += ms) })
}

export interface TestEnv {
  services: Services
  config: Config
  clock: ReturnType<typeof testClock>
  app: ReturnType<typeof createHttpApp>
  /** An account with one active order (any sender allowed). */
  accountId: number
  apiKey: string
  orderId: number
  /** A tool context for the account, for calling handlers directly. */
  ctx: ToolContext
  /** Another account with its own order, for isolation checks. */
  newAccount(): Promise<{ accountId: number; apiKey: string; orderId: number; ctx: ToolContext }>
  close(): Promise<void>
}

/** Services over an in-memory SQLite store, with one account ready to use. */
export async function createTestEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  const config = loadConfig({ MAILROOM_DATA_DIR: '/nonexistent', ...env })
  const clock = testClock()
  const store = openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
  const services = createServices(store, config, { logger: silentLogger, clock })
  const newAccount = async () => {
    const { account, apiKey } = await createAccount(services, 'test')
    const { order } = await createOrder(services, account.id, null, [])
    const ctx: ToolContext = { ...services, accountId: account.id, origin: '192.0.2.10' }
    return { accountId: account.id, apiKey, orderId: order.id, ctx }
  }
  const first = await newAccount()
  return { services, config, clock, app: createHttpApp(services), ...first, newAccount, close: () => store.close() }
}

/** A new data directory with account 1, its order 1 and an empty log: what bench/seed.ts fills. */
export async function dataDirToSeed(prefix: string): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), prefix))
  const store = openDataDir(dataDir)
  store.sqlite.exec(
    "INSERT INTO accounts (name, currency, price_base, price_per_message, billing_day, created_at) VALUES ('a', 'USD', 1, 0.0002, 1, 0)",
  )
  store.sqlite.exec(
    "INSERT INTO mail_orders (account_id, status, password_enc, created_at) VALUES (1, 'active', 'v1:x', 0)",
  )
  await store.close()
  return dataDir
}

/** The API key and SMTP credentials `mailroom serve` prints on the first start of a data directory. */
/**
 * `mailroom serve` in process over a new data directory (every port 0, no log lines), `env`
 * setting the rest. The caller stops it and removes the directory.
 */
export async function startTestServer(prefix: string, env: Record<string, string> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), prefix))
  const config = loadConfig({
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_HTTP_PORT: '0',
    MAILROOM_SMTP_PORT: '0',
    MAILROOM_SMTPS_PORT: '0',
    MAILROOM_LOG_LEVEL: 'silent',
    ...env,
  })
  const server = await startServer(config)
  return { server, config, dataDir, ...firstStartCredentials(server.firstStart!) }
}

/** `mailroom serve` started again on a test server's data directory, once the previous one stopped: a restart. */
export const restartTestServer = (config: Config) => startServer(config)

export function firstStartCredentials(firstStart: string) {
  const find = (pattern: RegExp) => pattern.exec(firstStart)![1]
  return {
    apiKey: find(/API key \(shown only now\): (\S+)/),
    smtp: { user: find(/SMTP username: +(\S+)/), pass: find(/SMTP password: +(\S+)/) },
  }
}

/** Calls the REST app with an API key and a JSON body (or a raw body with its own content type). */
export function call(
  env: Pick<TestEnv, 'app' | 'apiKey'>,
  method: string,
  path: string,
  body?: unknown,
  options: { apiKey?: string | null; contentType?: string } = {},
) {
  const headers: Record<string, string> = {}
  const key = options.apiKey === undefined ? env.apiKey : options.apiKey
  if (key !== null) headers['X-API-KEY'] = key
  let payload: BodyInit | undefined
  if (body !== undefined) {
    if (typeof body === 'string' || body instanceof FormData || body instanceof URLSearchParams)
      payload = body as BodyInit
    else payload = JSON.stringify(body)
    if (options.contentType) headers['Content-Type'] = options.contentType
    else if (!(body instanceof FormData) && !(body instanceof URLSearchParams))
      headers['Content-Type'] = 'application/json'
  }
  return env.app.request(path, { method, headers, body: payload })
}

/** The MCP SDK's client, connected over Streamable HTTP to `${base}/mcp` as the account of `apiKey`. The caller closes it. */
export async function mcpClient(base: string, apiKey: string): Promise<Client> {
  const client = new Client({ name: 'agent', version: '1' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { 'X-API-KEY': apiKey } } }),
  )
  return client
}

/** A test app served by Node on 127.0.0.1, port 0: real sockets, as `mailroom serve` has them. */
export async function serveApp(app: Pick<TestEnv['app'], 'fetch'>): Promise<{ port: number; close(): Promise<void> }> {
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0, ...HTTP_SERVE_OPTIONS })
  await new Promise((r) => server.once('listening', r))
  const { port } = server.address() as AddressInfo
  return { port, close: () => new Promise<void>((r) => server.close(() => r())) }
}

/** A test env with its app served on 127.0.0.1 (serveApp): `base` is its address; `close` ends both. */
export async function createServedTestEnv(env: Record<string, string> = {}): Promise<TestEnv & { base: string }> {
  const test = await createTestEnv(env)
  const served = await serveApp(test.app)
  const close = async () => {
    await served.close()
    await test.close()
  }
  return { ...test, base: `http://127.0.0.1:${served.port}`, close }
}

/** A JSON-RPC message POSTed to `url` (an MCP endpoint) over HTTP, session-less, with `headers` (a key or token). */
export const mcpPost = (url: string, headers: Record<string, string>, message: object) =>
  fetch(url, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...message }),
  })

/** What a `mailroom` command printed, and its exit status. */
export interface CliResult {
  status: number
  stdout: string
  stderr: string
}

class Exit extends Error {
  constructor(readonly code: number) {
    super(`process.exit(${code})`)
  }
}

let cliRunning: Promise<unknown> = Promise.resolve()

/**
 * The `mailroom` command in this process, as bin/mailroom.js runs it: its `main()` on `args`, with
 * `env` over this process's environment (undefined unsets), what it writes to stdout and stderr
 * (its log lines too) captured, and the exit status its process would have. For the commands that
 * do their work and end (the admin commands, --help); `serve`, `stdio` and `sink` run as processes
 * of their own. Starting node for each command took most of the CLI tests' time. Commands run one
 * at a time: each borrows the process's environment and output while it runs.
 */
export function runCli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  const result = cliRunning.then(() => runCliNow(args, env))
  cliRunning = result.catch(() => {})
  return result
}

async function runCliNow(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const out = { 1: '', 2: '' }
  const text = (chunk: string | Uint8Array) => (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString())
  const saved = { env: { ...process.env }, exit: process.exit, writeSync: fs.writeSync }
  const streams = [
    [process.stdout, 1],
    [process.stderr, 2],
  ] as const
  const writes = streams.map(([stream]) => stream.write)
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  for (const [stream, fd] of streams)
    stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      out[fd] += text(chunk)
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined
      done?.()
      return true
    }) as typeof stream.write
  // The log's lines: pino writes them to the file descriptor itself.
  fs.writeSync = ((fd: number, data: string | Uint8Array, ...rest: never[]) => {
    if (fd !== 1 && fd !== 2) return saved.writeSync(fd, data as never, ...rest)
    out[fd] += text(data)
    return typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength
  }) as typeof fs.writeSync
  process.exit = ((code?: number) => {
    throw new Exit(code ?? 0)
  }) as typeof process.exit
  let status = 0
  try {
    await main([process.execPath, 'mailroom', ...args])
  } catch (err) {
    if (err instanceof Exit) status = err.code
    else {
      // As bin/mailroom.js ends on an error.
      out[2] += `mailroom: ${err instanceof Error ? err.message : String(err)}\n`
      status = 1
    }
  } finally {
    streams.forEach(([stream], i) => {
      stream.write = writes[i]
    })
    fs.writeSync = saved.writeSync
    process.exit = saved.exit
    for (const key of Object.keys(process.env)) if (!(key in saved.env)) delete process.env[key]
    Object.assign(process.env, saved.env)
  }
  return { status, stdout: out[1], stderr: out[2] }
}
