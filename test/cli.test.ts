import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openDataDir } from '../storage/sqlite/index.js'
import { loadConfig } from '../config.js'
import { runCli, startServer } from './helpers.js'
import { startSink } from './relay/sink.js'
import { mcpWithToken, overHttp, tokensFor } from './transports/oauth-flow.js'

// The CLI as a user runs it: the package's bin, built by `npm test` (npm run build) before vitest.
const BIN = fileURLToPath(new URL('../bin/mailroom.js', import.meta.url))

/**
 * How long a test may wait on the servers and processes it starts (`mailroom serve`, `sink`, the bin): each
 * loads the whole product, which on a busy machine takes many seconds of the test's.
 */
const PROCESS_WAIT = 120_000

describe('mailroom command', { timeout: PROCESS_WAIT }, () => {
  let dataDir: string
  const children: ReturnType<typeof spawn>[] = []
  const sinks: { close(): Promise<void> }[] = []
  const servers: { stop(): Promise<void> }[] = []
  const settings = () => ({
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_HTTP_PORT: '0',
    MAILROOM_SMTP_PORT: '0',
    MAILROOM_SMTPS_PORT: '0',
    MAILROOM_LOG_LEVEL: 'info',
  })
  const env = () => ({ ...process.env, ...settings() })
  /** The command on the test's data directory, in this process (see runCli). */
  const runWith = (overrides: Record<string, string | undefined>, ...args: string[]) =>
    runCli(args, { ...settings(), ...overrides })
  const run = (...args: string[]) => runWith({}, ...args)
  /** The package's bin in a process of its own, as a user runs it. */
  const spawnWith = (overrides: Record<string, string>, ...args: string[]) => {
    const r = spawnSync(process.execPath, [BIN, ...args], {
      env: { ...env(), ...overrides },
      encoding: 'utf8',
      timeout: 30_000,
    })
    return { status: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  /** The package's bin in a process of its own, without blocking this one (its servers and clients go on meanwhile). */
  const runAsync = (...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, ...args], { env: env() })
      children.push(child)
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d) => (stdout += d))
      child.stderr.on('data', (d) => (stderr += d))
      child.on('close', (status) => resolve({ status, stdout, stderr }))
    })
  const jsonWith = async (overrides: Record<string, string | undefined>, ...args: string[]) => {
    const r = await runWith(overrides, ...args)
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    return JSON.parse(r.stdout)
  }
  const json = (...args: string[]) => jsonWith({}, ...args)

  /** Starts `mailroom serve` and resolves with its base URL and everything it printed so far. */
  const serve = (overrides: Record<string, string> = {}, ...options: string[]) =>
    new Promise<{ base: string; output: () => string; child: ChildProcessWithoutNullStreams }>((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, 'serve', ...options], { env: { ...env(), ...overrides } })
      children.push(child)
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
        const m = /"port":(\d+).*HTTP and SMTP listening/.exec(out)
        if (m) resolve({ base: `http://127.0.0.1:${m[1]}`, output: () => out, child })
      })
      child.stderr.on('data', (d) => (out += d))
      child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)))
    })

  /**
   * `mailroom serve` in this process, on the test's data directory: a running server for the
   * commands to work beside, started without a node of its own. What the command itself prints
   * and how its process ends are the spawned `serve()`'s tests.
   */
  const serveHere = async (overrides: Record<string, string> = {}) => {
    const server = await startServer(loadConfig({ ...settings(), MAILROOM_LOG_LEVEL: 'silent', ...overrides }))
    servers.push(server)
    return { base: `http://127.0.0.1:${server.httpPort}`, firstStart: server.firstStart ?? '' }
  }

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-cli-'))
  })
  afterEach(async () => {
    for (const c of children.splice(0)) c.kill('SIGKILL')
    for (const server of servers.splice(0)) await server.stop()
    for (const sink of sinks.splice(0)) await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('creates an account and an order whose key and password work against a running server', async () => {
    // The package's bin as a user runs it; the commands after it run in this process (see runCli).
    const created = spawnWith({}, 'account', 'create', '--name', 'acme', '--json')
    expect({ status: created.status, stderr: created.stderr }).toEqual({ status: 0, stderr: '' })
    const account = JSON.parse(created.stdout)
    expect(account).toEqual({ id: expect.any(Number), apiKey: expect.stringMatching(/^mr_[A-Za-z0-9_-]{43}$/) })
    const order = await json(
      'order',
      'create',
      '--account',
      String(account.id),
      '--comment',
      'billing',
      '--sender',
      '@acme.example',
      '--json',
    )
    expect(order).toEqual({
      id: expect.any(Number),
      username: `mb${order.id}`,
      password: expect.any(String),
      status: 'active',
      sandbox: false,
      list: false,
    })
    expect(order.password.length).toBeGreaterThanOrEqual(20)

    const { base } = await serveHere()
    const headers = { 'X-API-KEY': account.apiKey }
    const detail = await (await fetch(`${base}/mail/${order.id}`, { headers })).json()
    expect(detail).toEqual({
      id: order.id,
      status: 'active',
      username: `mb${order.id}`,
      comment: 'billing',
      password: order.password,
    })

    // The authorized-sender list set on the command line is enforced by the server.
    const send = (from: string) =>
      fetch(`${base}/mail/send`, {
        method: 'POST',
        headers: { ...headers, 'Content-Type': 'application/json' },
        body: JSON.stringify({ from, to: 'x@example.com', subject: 's', body: 'b' }),
      })
    expect((await send('someone@other.example')).status).toBe(400)
    expect((await send('billing@acme.example')).status).toBe(200)

    // The command works on the same data directory while the server runs.
    await json('order', 'cancel', String(order.id), '--json')
    expect((await send('billing@acme.example')).status).toBe(404)
    const listed = await json('order', 'list', '--account', String(account.id), '--json')
    expect(listed).toEqual([
      {
        id: order.id,
        username: `mb${order.id}`,
        status: 'canceled',
        comment: 'billing',
        senders: ['@acme.example'],
        sandbox: false,
        list: false,
      },
    ])

    // A revoked key stops working at once.
    const keys = await json('account', 'key', 'list', '--account', String(account.id), '--json')
    await json('account', 'key', 'revoke', String(keys[0].id), '--json')
    expect((await fetch(`${base}/mail`, { headers })).status).toBe(401)
  })

  it('prints the first-start credentials once, and they work', async () => {
    const first = await serve()
    await expect.poll(() => first.output(), { timeout: PROCESS_WAIT }).toContain('Try it')
    const out = first.output()
    const key = /API key \(shown only now\): (mr_\S+)/.exec(out)?.[1]
    expect(key).toBeDefined()
    expect(out).toMatch(/SMTP username: +mb1/)
    // Without a smarthost mail is real: the banner says so, and how to keep it on the machine.
    expect(out).toMatch(
      /Mail goes to: +the recipients' MX hosts, found by DNS: real mail\. To keep it on this machine,\n +start with --sink \(`mailroom serve --sink`, what npm start runs\)/,
    )
    const curl = /Try it: +curl -H 'X-API-KEY: (\S+)' (\S+)/.exec(out)
    expect(curl?.[1]).toBe(key)
    // On port 0 the curl line and the published documents name the port the server got.
    const port = new URL(first.base).port
    expect(curl?.[2]).toBe(`http://localhost:${port}/mail`)
    const openapi = await (await fetch(`${first.base}/spec/openapi.json`)).json()
    expect(openapi.servers).toEqual([{ url: `http://localhost:${port}` }])
    const orders = await (await fetch(`${first.base}/mail`, { headers: { 'X-API-KEY': key! } })).json()
    expect(orders).toEqual([{ id: 1, status: 'active', username: 'mb1', comment: 'created on first start' }])
    // The data directory and the database are the owner's alone (they hold every account's mail).
    const mode = (f: string) => statSync(join(dataDir, f)).mode & 0o777
    expect({ db: mode('mailroom.db'), wal: mode('mailroom.db-wal'), secret: mode('secret.key') }).toEqual({
      db: 0o600,
      wal: 0o600,
      secret: 0o600,
    })
    for (const c of children.splice(0)) c.kill('SIGKILL')
    const second = await serve()
    expect(second.output()).not.toContain('API key')
    // Every start, not only the first, says that mail is real, before it delivers or listens.
    for (const start of [first, second]) {
      const lines = start.output().split('\n')
      const said = lines.findIndex((l) =>
        l.includes(
          "mail goes to the recipients' MX hosts, found by DNS: real mail: it leaves this machine. To keep it here, start with --sink",
        ),
      )
      expect(said).toBeGreaterThanOrEqual(0)
      expect(JSON.parse(lines[said]).level).toBe(40)
      expect(said).toBeLessThan(lines.findIndex((l) => l.includes('HTTP and SMTP listening')))
    }
  })

  it('keeps mail on the machine with --sink, what npm start runs: it says so first, and prints each message it takes', async () => {
    expect(JSON.parse(readFileSync(join(dirname(BIN), '..', 'package.json'), 'utf8')).scripts.start).toBe(
      'node bin/mailroom.js serve --sink',
    )
    const server = await serve({}, '--sink')
    await expect.poll(() => server.output(), { timeout: 10_000 }).toContain('Try it')
    const out = server.output()
    const [, port] =
      /"msg":"mail goes to the sink of mailroom serve --sink at 127\.0\.0\.1:(\d+), which prints each message: none leaves this machine"/.exec(
        out,
      )!
    expect(out).toContain(
      `Mail goes to:             the sink of mailroom serve --sink at 127.0.0.1:${port}, which prints each message:\n                            none leaves this machine. Real delivery: docs/relay.md, "Sending real mail"`,
    )
    expect(out).not.toContain('real mail:')
    const key = /API key \(shown only now\): (mr_\S+)/.exec(out)![1]
    const sent = await fetch(`${server.base}/mail/send`, {
      method: 'POST',
      headers: { 'X-API-KEY': key, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'to=bob@example.com&from=me@example.org&subject=Kept here&body=Hi',
    })
    const { text: txid } = await sent.json()
    await expect
      .poll(() => server.output(), { timeout: 10_000 })
      .toMatch(/--- message 1: from <me@example\.org> to <bob@example\.com>, \d+ bytes\n[\s\S]*Subject: Kept here/)
    const log = async () =>
      (await (await fetch(`${server.base}/mail/log?mailid=${txid}`, { headers: { 'X-API-KEY': key } })).json())
        .emails[0]
    await expect.poll(log, { timeout: 10_000 }).toMatchObject({
      delivered: 1,
      response: expect.stringContaining('accepted by the sink as message 1'),
    })
  })

  it('refuses --sink with MAILROOM_SMARTHOST, which says otherwise, and starts nothing', () => {
    const r = spawnWith({ MAILROOM_SMARTHOST: '127.0.0.1:2626' }, 'serve', '--sink')
    expect({ status: r.status, stderr: r.stderr }).toEqual({
      status: 1,
      stderr:
        'mailroom: --sink and MAILROOM_SMARTHOST both say where mail goes: unset MAILROOM_SMARTHOST to keep mail in the sink, or start without --sink to send it to the smarthost\n',
    })
    expect(readdirSync(dataDir)).toEqual([])
  })

  it('runs a local sink that prints what mailroom delivers to it, as the README tries it', async () => {
    const sink = spawn(process.execPath, [BIN, 'sink', '--port', '0', '--json'], { env: env() })
    children.push(sink)
    let printed = ''
    let said = ''
    sink.stdout.on('data', (d) => (printed += d))
    sink.stderr.on('data', (d) => (said += d))
    await expect.poll(() => said, { timeout: PROCESS_WAIT }).toMatch(/listening on 127\.0\.0\.1:\d+/)
    const port = /listening on 127\.0\.0\.1:(\d+); start mailroom with MAILROOM_SMARTHOST=127\.0\.0\.1:\1/.exec(
      said,
    )![1]
    const server = await serve({ MAILROOM_SMARTHOST: `127.0.0.1:${port}` })
    await expect.poll(() => server.output(), { timeout: PROCESS_WAIT }).toContain('Try it')
    expect(server.output()).toContain(`Mail goes to:             the smarthost 127.0.0.1:${port} (MAILROOM_SMARTHOST)`)
    const key = /API key \(shown only now\): (mr_\S+)/.exec(server.output())![1]
    const sent = await fetch(`${server.base}/mail/send`, {
      method: 'POST',
      headers: { 'X-API-KEY': key, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'to=bob@example.com&from=me@example.org&subject=Hello&body=Hi',
    })
    const { text: txid } = await sent.json()
    await expect.poll(() => printed, { timeout: PROCESS_WAIT }).toContain('\n')
    const message = JSON.parse(printed.split('\n')[0])
    expect(message).toMatchObject({ n: 1, from: 'me@example.org', to: ['bob@example.com'] })
    expect(message.message).toMatch(/^Subject: Hello\r$/m)
    const log = async () =>
      (await (await fetch(`${server.base}/mail/log?mailid=${txid}`, { headers: { 'X-API-KEY': key } })).json())
        .emails[0]
    await expect.poll(log, { timeout: PROCESS_WAIT }).toMatchObject({
      delivered: 1,
      code: 250,
      response: expect.stringContaining('accepted by the sink as message 1'),
    })
  })

  it('stops a start that cannot listen or read its certificate with a message naming the settings, and creates no account until one succeeds', async () => {
    const busy = createServer()
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
    try {
      const port = String((busy.address() as AddressInfo).port)
      const http = spawnWith({ MAILROOM_HTTP_PORT: port }, 'serve')
      expect(http.status).not.toBe(0)
      expect(http.stderr).toContain(`cannot listen on 127.0.0.1:${port} (MAILROOM_HTTP_HOST, MAILROOM_HTTP_PORT)`)
      const smtp = spawnWith({ MAILROOM_SMTP_PORT: port }, 'serve')
      expect(smtp.stderr).toContain(`cannot listen on 127.0.0.1:${port} (MAILROOM_SMTP_HOST, MAILROOM_SMTP_PORT)`)
      const smtps = spawnWith({ MAILROOM_SMTPS_PORT: port }, 'serve')
      expect(smtps.stderr).toContain(`cannot listen on 127.0.0.1:${port} (MAILROOM_SMTP_HOST, MAILROOM_SMTPS_PORT)`)
    } finally {
      busy.close()
    }
    const notPem = join(dataDir, 'not-a-cert.pem')
    writeFileSync(notPem, 'not a certificate\n')
    const tls = spawnWith({ MAILROOM_TLS_CERT: notPem, MAILROOM_TLS_KEY: notPem }, 'serve')
    expect(tls.status).not.toBe(0)
    expect(tls.stderr).toContain('(MAILROOM_TLS_CERT, MAILROOM_TLS_KEY)')
    // None of these created the first account: its API key, shown once, is shown by the start that works.
    expect(await json('account', 'list', '--json')).toEqual([])
    expect((await serveHere()).firstStart).toContain('API key (shown only now)')
  })

  it('manages authorized senders and refuses bad arguments', async () => {
    const account = await json('account', 'create', '--json')
    const order = await json('order', 'create', '--account', String(account.id), '--json')
    expect(order).toMatchObject({ sandbox: false, list: false })
    const bulk = await json('order', 'create', '--account', String(account.id), '--list', '--json')
    expect(bulk).toMatchObject({ sandbox: false, list: true })
    expect((await run('order', 'list', '--account', String(account.id))).stdout).toContain(
      `${bulk.id}\tmb${bulk.id}\tactive (bulk)`,
    )
    expect((await json('sender', 'allow', '--order', String(order.id), 'Boss@Example.com', '--json')).senders).toEqual([
      'boss@example.com',
    ])
    expect((await json('sender', 'revoke', '--order', String(order.id), 'boss@example.com', '--json')).senders).toEqual(
      [],
    )
    expect((await run('sender', 'allow', '--order', String(order.id), 'not-an-address')).status).not.toBe(0)
    expect((await run('order', 'create', '--account', '999', '--json')).stderr).toContain('no account 999')
    expect((await run('order', 'create', '--account', 'abc')).stderr).toContain('--account must be a positive integer')
  })

  it("replaces an order's SMTP password: the new one is the order's, the old one gone", async () => {
    const account = await json('account', 'create', '--json')
    const order = await json('order', 'create', '--account', String(account.id), '--json')
    const rotated = await json('order', 'password', 'rotate', '--order', String(order.id), '--json')
    expect(rotated).toEqual({ id: order.id, username: `mb${order.id}`, password: expect.any(String) })
    expect(rotated.password).not.toBe(order.password)
    const store = openDataDir(dataDir)
    expect(await store.orders.password(order.id)).toBe(rotated.password)
    await store.close()
    expect((await run('order', 'password', 'rotate', '--order', String(order.id))).stdout).toMatch(
      new RegExp(
        `^mail order ${order.id}: new SMTP password\nSMTP username: mb${order.id}\nSMTP password: \\S{20,}\n$`,
      ),
    )
    expect((await run('order', 'password', 'rotate', '--order', '999')).stderr).toContain('no mail order 999')
  })

  it("lists an account's OAuth grants and revokes one at once; revoking an API key leaves grants alone", async () => {
    const server = await serveHere()
    const apiKey = /API key \(shown only now\): (mr_\S+)/.exec(server.firstStart)![1]
    const app = overHttp(server.base)
    const resource = `${server.base.replace('127.0.0.1', 'localhost')}/mcp`
    const read = await tokensFor(app, apiKey, { resource, scope: 'mail:read' })
    const all = await tokensFor(app, apiKey, { resource })
    const listed = await json('account', 'grants', '--account', '1', '--json')
    expect(listed).toEqual([
      expect.objectContaining({ id: 1, client: 'Test agent', scopes: ['mail:read'], resource, sandbox: false }),
      expect.objectContaining({ id: 2, scopes: ['mail:read', 'mail:send', 'mail:manage'] }),
    ])
    expect((await run('account', 'grants', '--account', '1')).stdout).toMatch(
      /^1\tTest agent\tmail:read\thttp:\/\/localhost:\d+\/mcp\tlast used \S+\n2\t/,
    )
    const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' }
    // Revoking the API key that allowed them leaves the grants working.
    await json('account', 'key', 'revoke', '1', '--json')
    expect((await mcpWithToken(app, read.access_token, list)).status).toBe(200)
    expect(await json('account', 'grant', 'revoke', '1', '--json')).toEqual({ revoked: 1 })
    expect((await mcpWithToken(app, read.access_token, list)).status).toBe(401)
    expect((await mcpWithToken(app, all.access_token, list)).status).toBe(200)
    expect(await json('account', 'grants', '--account', '1', '--json')).toMatchObject([{ id: 2 }])
    const again = await run('account', 'grant', 'revoke', '1')
    expect(again.status).not.toBe(0)
    expect(again.stderr).toContain('no grant 1')
    expect((await run('account', 'grants', '--account', '9')).stderr).toContain('no account 9')
  })

  it("manages an account's webhooks, with the checks of addWebhook, and refuses bad arguments", async () => {
    const account = await json('account', 'create', '--json')
    const other = await json('account', 'create', '--json')
    const a = ['--account', String(account.id)]
    const added = await json(
      'webhook',
      'add',
      ...a,
      'https://hooks.example.com/in',
      '--event',
      'message.delivered,message.failed',
      '--event',
      'message.refused',
      '--description',
      'crm',
      '--json',
    )
    expect(added).toEqual({ id: 1, secret: expect.stringMatching(/^whsec_/) })
    const text = await run('webhook', 'add', ...a, 'https://hooks.example.com/2', '--event', 'message.accepted')
    expect(text.stdout).toMatch(/^webhook 2 added\nsigning secret \(shown only now\): whsec_\S+\n$/)
    expect(await json('webhook', 'list', ...a, '--json')).toMatchObject([
      {
        id: 1,
        url: 'https://hooks.example.com/in',
        events: ['message.delivered', 'message.failed', 'message.refused'],
        description: 'crm',
        status: 'enabled',
      },
      { id: 2, events: ['message.accepted'] },
    ])
    expect((await run('webhook', 'list', ...a)).stdout).toContain(
      '1\thttps://hooks.example.com/in\tmessage.delivered,message.failed,message.refused\tenabled',
    )
    // Refusals: nothing is stored.
    const refused = [
      [
        ['webhook', 'add', ...a, 'http://127.0.0.1:9/', '--event', 'message.failed'],
        'url: 127.0.0.1 is a loopback address',
      ],
      [
        ['webhook', 'add', ...a, 'https://hooks.example.com/', '--event', 'message.opened'],
        '"message.opened" is not an event type',
      ],
      [['webhook', 'add', ...a, 'https://hooks.example.com/'], 'events: Too small: expected array to have >=1 items'],
      [['webhook', 'remove', '--account', String(other.id), '1'], 'id: webhook 1 not found'],
      [['webhook', 'list', '--account', '999'], 'no account 999'],
    ] as const
    for (const [args, message] of refused) {
      const r = await run(...args)
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain(message)
    }
    expect(await json('webhook', 'list', ...a, '--json')).toHaveLength(2)
    expect(await json('webhook', 'remove', ...a, '1', '--json')).toEqual({ id: 1, deleted: true })
    expect((await json('webhook', 'list', ...a, '--json')).map((h: { id: number }) => h.id)).toEqual([2])
  })

  it('manages sending domains and prints the DNS records to publish; a domain belongs to one account', async () => {
    const a = (await json('account', 'create', '--json')).id as number
    const b = (await json('account', 'create', '--json')).id as number
    const added = JSON.parse(
      (
        await runWith(
          { MAILROOM_NODE_NAME: 'mx.relay.test' },
          'domain',
          'add',
          'Example.COM',
          '--account',
          String(a),
          '--json',
        )
      ).stdout,
    )
    expect(added).toMatchObject({
      domain: 'example.com',
      selector: expect.stringMatching(/^mr-\d{8}$/),
      algorithm: 'rsa',
    })
    expect(added.records).toEqual([
      {
        type: 'TXT',
        name: `${added.selector}._domainkey.example.com`,
        value: expect.stringMatching(/^v=DKIM1; k=rsa; p=MII[A-Za-z0-9+/]{380,}=*$/),
      },
      { type: 'TXT', name: 'example.com', value: 'v=spf1 a:mx.relay.test ~all' },
      { type: 'TXT', name: '_dmarc.example.com', value: 'v=DMARC1; p=none; adkim=r; aspf=r' },
    ])
    // For a person: rows a DNS provider's form takes, type, name and value.
    const text = await run(
      'domain',
      'add',
      'news.example.org',
      '--account',
      String(a),
      '--selector',
      's1',
      '--algorithm',
      'ed25519',
    )
    expect(text.stdout).toMatch(/^TXT\ts1\._domainkey\.news\.example\.org\tv=DKIM1; k=ed25519; p=\S{44}$/m)
    expect(text.stdout).toContain('mailroom domain check news.example.org')

    const before = [
      await json('domain', 'list', '--account', String(a), '--json'),
      await json('domain', 'list', '--account', String(b), '--json'),
    ]
    expect(before[0].map((d: { domain: string }) => d.domain)).toEqual(['example.com', 'news.example.org'])
    for (const [args, message] of [
      [['domain', 'add', 'example.com', '--account', String(b)], 'example.com is a sending domain of another account'],
      [['domain', 'add', 'example.com', '--account', String(a)], 'is a sending domain of account'],
      [['domain', 'add', 'not a domain', '--account', String(a)], '"not a domain" is not a domain name'],
      [['domain', 'add', 'example.net', '--account', '99'], 'no account 99'],
      [['domain', 'add', 'example.net', '--account', String(a), '--algorithm', 'dsa'], "argument 'dsa' is invalid"],
      [['domain', 'rotate', 'example.net'], 'example.net is not a sending domain'],
      [['domain', 'remove', 'example.com', '--selector', 'nope'], 'example.com has no key with selector nope'],
    ]) {
      const r = await run(...args)
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain(message)
    }
    // Nothing of a refused command was stored.
    expect([
      await json('domain', 'list', '--account', String(a), '--json'),
      await json('domain', 'list', '--account', String(b), '--json'),
    ]).toEqual(before)

    // A rotation adds a key that waits while the old one signs; removing the old one hands over.
    const rotated = await json('domain', 'rotate', 'example.com', '--selector', 'next', '--json')
    expect(rotated).toMatchObject({ domain: 'example.com', selector: 'next', signing: added.selector })
    const keys = async () =>
      (await json('domain', 'list', '--account', String(a), '--json'))
        .filter((d: { domain: string }) => d.domain === 'example.com')
        .map((d: { selector: string; signing: boolean }) => `${d.selector} ${d.signing ? 'signing' : 'waiting'}`)
    expect(await keys()).toEqual([`${added.selector} signing`, 'next waiting'])
    expect((await json('domain', 'remove', 'example.com', '--selector', added.selector, '--json')).selectors).toEqual([
      'next',
    ])
    expect(await keys()).toEqual(['next signing'])
    // Removed, the domain is free for another account.
    expect((await run('domain', 'remove', 'example.com')).stdout).toContain(
      'example.com removed: its mail goes out unsigned',
    )
    expect((await json('domain', 'add', 'example.com', '--account', String(b), '--json')).domain).toBe('example.com')
  })

  it('manages traps, imports a block list and suppresses recipients, and the server obeys', async () => {
    const account = await json('account', 'create', '--json')
    await json('order', 'create', '--account', String(account.id), '--json')
    expect(await json('trap', 'add', 'Trap@Example.net', '--json')).toEqual({ trap: 'trap@example.net', added: true })
    await json('trap', 'add', '@honeypot.test', '--json')
    expect(await json('trap', 'list', '--json')).toEqual(['@honeypot.test', 'trap@example.net'])
    // An escaped quoted local part names the same mailbox (RFC 5321 §4.1.2): stored as the sends read it.
    expect(await json('trap', 'add', '"t\\rap"@example.net', '--json')).toEqual({
      trap: 'trap@example.net',
      added: false,
    })
    expect((await run('trap', 'remove', 'nobody@example.net')).stderr).toContain('is not a trap')

    const file = join(dataDir, 'feed.txt')
    writeFileSync(file, '# a feed\nspammer@bad.example\n\nnot an address\nOther@Bad.example\n')
    expect(await json('blocklist', 'import', file, '--account', String(account.id), '--json')).toEqual({
      account: account.id,
      imported: 2,
      skipped: ['not an address'],
    })

    await json('suppress', 'add', '--account', String(account.id), 'Gone@Example.com', '--json')
    await json('suppress', 'add', '--account', String(account.id), '"g\\one"@example.com', '--json')
    expect(await json('suppress', 'list', '--account', String(account.id), '--json')).toEqual([
      { address: 'gone@example.com', reason: 'suppressed by the operator', since: expect.any(String) },
    ])

    const { base } = await serveHere()
    const send = async (from: string, to: string) => {
      const res = await fetch(`${base}/mail/send`, {
        method: 'POST',
        headers: { 'X-API-KEY': account.apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ from, to, subject: 's', body: 'b' }),
      })
      return { status: res.status, body: await res.json() }
    }
    expect(await send('spammer@bad.example', 'x@example.com')).toMatchObject({
      status: 400,
      body: { message: expect.stringContaining('blocked') },
    })
    expect(await send('me@good.example', 'gone@example.com')).toMatchObject({
      status: 400,
      body: { message: expect.stringContaining('local block list') },
    })
    expect(await send('me@good.example', 'anyone@honeypot.test')).toMatchObject({
      status: 400,
      body: { message: expect.stringContaining('spam trap') },
    })
    // The trap blocked the sender for everything.
    expect((await send('me@good.example', 'friend@example.com')).status).toBe(400)

    await json('suppress', 'remove', '--account', String(account.id), 'gone@example.com', '--json')
    expect((await send('other@elsewhere.example', 'gone@example.com')).status).toBe(200)
    expect((await run('suppress', 'remove', '--account', String(account.id), 'gone@example.com')).stderr).toContain(
      'is not suppressed',
    )
  })

  it('refuses a data directory without a database, and an account that does not exist, instead of answering with nothing', async () => {
    // Nothing has created a database in this directory yet: only commands that create may.
    for (const args of [
      ['trap', 'list'],
      ['account', 'list'],
      ['order', 'list', '--account', '1'],
      ['suppress', 'list', '--account', '1'],
    ]) {
      const r = await run(...args)
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain(`no mailroom database in ${dataDir} (MAILROOM_DATA_DIR)`)
    }
    expect(existsSync(join(dataDir, 'mailroom.db'))).toBe(false)
    // A data directory mailroom creates is its owner's alone.
    const fresh = join(dataDir, 'fresh')
    expect((await runWith({ MAILROOM_DATA_DIR: fresh }, 'trap', 'add', 'trap@example.net')).status).toBe(0)
    expect(statSync(fresh).mode & 0o777).toBe(0o700)

    const account = await json('account', 'create', '--json')
    for (const args of [
      ['account', 'key', 'list'],
      ['order', 'list'],
      ['suppress', 'list'],
    ]) {
      const r = await run(...args, '--account', '99')
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain('no account 99')
    }
    // A key's prefix pasted from `key list`, ellipsis and all, revokes it.
    const { stdout } = await run('account', 'key', 'list', '--account', String(account.id))
    const prefix = stdout.split('\t')[1]
    expect(prefix).toMatch(/^mr_.+…$/)
    expect(await json('account', 'key', 'revoke', prefix, '--json')).toEqual({ revoked: prefix })
  })

  it('stops on SIGTERM even when nobody reads its output any more', async () => {
    const { child } = await serve()
    // As when the process that started it is gone: its output pipe has no reader.
    child.stdout.destroy()
    child.stderr.destroy()
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
  })

  it('prints its version, and says why a remote mailroom cannot be reached', async () => {
    const version = spawnWith({}, '--version')
    expect(version.status).toBe(0)
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/)
    expect(await run('--version')).toEqual(version)
    // A port nothing listens on: one just given up.
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise((resolve) => probe.close(resolve))
    const remote = spawnWith({ MAILROOM_API_KEY: 'mr_x' }, 'stdio', '--url', `http://127.0.0.1:${port}`)
    expect(remote.status).not.toBe(0)
    expect(remote.stderr).toContain(`cannot reach the mailroom at http://127.0.0.1:${port}/mcp: fetch failed (`)
    expect(remote.stderr).toMatch(/ECONNREFUSED/)
  })

  it('refuses to start on a Node.js older than 22.19, saying which it is, and touches nothing', () => {
    // The same node, made to report another version before the command's first line runs.
    const as = (version: string, ...args: string[]) => {
      const pretend = [
        `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '${version}' } })`,
        `Object.defineProperty(process, 'version', { value: 'v${version}' })`,
      ].join(';')
      const preload = `data:text/javascript,${encodeURIComponent(pretend)}`
      const r = spawnSync(process.execPath, ['--import', preload, BIN, ...args], {
        env: env(),
        encoding: 'utf8',
        timeout: 30_000,
      })
      return { status: r.status, stdout: r.stdout, stderr: r.stderr }
    }
    for (const old of ['20.20.2', '22.18.0']) {
      expect(as(old, 'serve')).toEqual({
        status: 1,
        stdout: '',
        stderr: `mailroom needs Node.js 22.19 or newer (this is v${old})\n`,
      })
    }
    expect(readdirSync(dataDir)).toEqual([])
    // The floor is package.json's own, and the floor itself runs.
    const engines = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node
    expect(engines).toMatch(/^\^22\.19\.0 \|\|/)
    const floor = as('22.19.0', '--version')
    expect(floor.stderr).toBe('')
    expect(floor.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/)
  })

  it('has --help on every subcommand', async () => {
    for (const args of [
      [],
      ['serve'],
      ['stdio'],
      ['account'],
      ['account', 'create'],
      ['account', 'key', 'create'],
      ['account', 'key', 'revoke'],
      ['order', 'create'],
      ['order', 'cancel'],
      ['order', 'list'],
      ['sender', 'allow'],
      ['sender', 'revoke'],
      ['trap', 'add'],
      ['trap', 'remove'],
      ['trap', 'list'],
      ['blocklist', 'import'],
      ['suppress', 'add'],
      ['suppress', 'remove'],
      ['suppress', 'list'],
      ['queue', 'list'],
      ['queue', 'retry'],
      ['queue', 'cancel'],
      ['domain', 'add'],
      ['domain', 'list'],
      ['domain', 'rotate'],
      ['domain', 'remove'],
      ['domain', 'check'],
      ['backup'],
    ]) {
      const r = await run(...args, '--help')
      expect(r.status, args.join(' ')).toBe(0)
      expect(r.stdout).toContain('Usage: mailroom')
    }
  })

  it('marks required options in --help, and says what is wrong with a command line in one line', async () => {
    const help = (await run('order', 'list', '--help')).stdout
    expect(help).toMatch(/^ +--account <id> +account id \(required\)$/m)
    expect(help).toMatch(/^ +--json +print JSON for scripts$/m)
    expect((await run('sender', 'allow', '--help')).stdout).toMatch(/^ +--order <id> +mail order id \(required\)$/m)
    expect((await run('order', 'create', '--help')).stdout).toMatch(/^ +--comment <text> +a note shown in listings$/m)

    // The error and where to read more, not the whole usage.
    for (const [args, line] of [
      [
        ['order', 'list'],
        "mailroom: error: required option '--account <id>' not specified (see mailroom order list --help)",
      ],
      [
        ['account', 'key', 'create', '--account', 'abc'],
        "mailroom: error: option '--account <id>' argument 'abc' is invalid. --account must be a positive integer (see mailroom account key create --help)",
      ],
      [['no-such-command'], "mailroom: error: unknown command 'no-such-command' (see mailroom --help)"],
    ] as const) {
      const r = await run(...args)
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }, args.join(' ')).toEqual({
        status: 1,
        stdout: '',
        stderr: `${line}\n`,
      })
    }
    // The package's bin, in a process of its own, says the same and ends with the same status.
    for (const args of [
      ['order', 'list'],
      ['order', 'list', '--account', '9'],
    ])
      expect(spawnWith({}, ...args), args.join(' ')).toEqual(await run(...args))
    // Refused before the data directory was opened.
    expect(existsSync(join(dataDir, 'mailroom.db'))).toBe(false)
  })

  it('lists, retries and cancels a recipient that a destination defers, while the server runs', async () => {
    const sink = await startSink()
    sinks.push(sink)
    let tries = 0
    sink.state.rcptRule = () => (tries++, { code: 451, message: '4.7.1 try again later' })
    const account = await json('account', 'create', '--json')
    await json('order', 'create', '--account', String(account.id), '--json')
    // An hour between attempts: an attempt after the first is the operator's doing.
    const { base } = await serveHere({ MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`, MAILROOM_RETRY_SCHEDULE: '1h' })
    const headers = { 'X-API-KEY': account.apiKey }
    const sent = await fetch(`${base}/mail/send`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ from: 'me@example.org', to: 'later@example.com', subject: 's', body: 'b' }),
    })
    const txid: string = (await sent.json()).text
    const list = (...args: string[]) => json('queue', 'list', ...args, '--json')
    /** Waits for the recipient's attempt `n` to be recorded as deferred. */
    const deferredAfter = (n: number) =>
      expect
        .poll(async () => (await list()).map((r: { state: string; attempts: number }) => `${r.state} ${r.attempts}`), {
          timeout: PROCESS_WAIT,
        })
        .toEqual([`deferred ${n}`])

    await deferredAfter(1)
    const [row] = await list('--account', String(account.id))
    expect(row).toEqual({
      txid,
      account: account.id,
      recipient: 'later@example.com',
      state: 'deferred',
      queued: expect.any(String),
      attempts: 1,
      code: 451,
      response: expect.stringContaining('4.7.1 try again later'),
      nextAttempt: expect.any(String),
      node: null,
    })
    expect(Date.parse(row.nextAttempt) - Date.parse(row.queued)).toBeGreaterThan(59 * 60_000)
    expect((await run('queue', 'list')).stdout).toBe(
      `TXID\tACCOUNT\tRECIPIENT\tSTATE\tQUEUED\tATTEMPTS\tNEXT ATTEMPT\tLAST REPLY\n${txid}\t${account.id}\tlater@example.com\tdeferred\t${row.queued}\t1\t${row.nextAttempt}\t${row.response}\n`,
    )
    const other = await json('account', 'create', '--json')
    expect(await list('--account', String(other.id))).toEqual([])

    // The running server takes up a retried recipient at its next look at the queue.
    expect(await json('queue', 'retry', txid, '--json')).toEqual({ txid, changed: 1, inFlight: 0 })
    await deferredAfter(2)
    expect(tries).toBe(2)
    expect((await run('queue', 'retry', '--all')).stdout).toBe('1 recipient due now\n')
    await deferredAfter(3)
    expect(tries).toBe(3)

    // Refusals change nothing.
    const before = await list()
    const unknown = 'f'.repeat(18)
    for (const [args, stderr] of [
      [['queue', 'retry', unknown], `mailroom: no transaction ${unknown}\n`],
      [['queue', 'cancel', unknown], `mailroom: no transaction ${unknown}\n`],
      [['queue', 'retry'], 'mailroom: error: give a transaction id or --all (see mailroom queue retry --help)\n'],
      [
        ['queue', 'retry', txid, '--all'],
        'mailroom: error: give a transaction id or --all (see mailroom queue retry --help)\n',
      ],
      [['queue', 'cancel'], "mailroom: error: missing required argument 'txid' (see mailroom queue cancel --help)\n"],
      [['queue', 'list', '--account', '99'], 'mailroom: no account 99\n'],
    ] as const) {
      const r = await run(...args)
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }, args.join(' ')).toEqual({
        status: 1,
        stdout: '',
        stderr,
      })
    }
    expect(await list()).toEqual(before)

    expect((await run('queue', 'cancel', txid)).stdout).toBe(`1 recipient of ${txid} canceled\n`)
    expect(await list()).toEqual([])
    expect((await run('queue', 'list')).stdout).toBe('nothing waits in the queue\n')
    const log = await (await fetch(`${base}/mail/log?mailid=${txid}`, { headers })).json()
    expect(log.emails).toEqual([
      expect.objectContaining({
        id: txid,
        to: 'later@example.com',
        delivered: 0,
        code: null,
        response: 'canceled by the operator',
        locked: 0,
      }),
    ])
    // Final: neither tried again nor canceled twice.
    expect(await json('queue', 'retry', '--all', '--json')).toEqual({ txid: null, changed: 0, inFlight: 0 })
    const again = await run('queue', 'cancel', txid)
    expect({ status: again.status, stderr: again.stderr }).toEqual({
      status: 1,
      stderr: `mailroom: nothing of transaction ${txid} waits in the queue: every recipient is final\n`,
    })
    expect(tries).toBe(3)
  })

  it('backs up the database while sends go on: the copy opens and holds every message accepted before', async () => {
    const sink = await startSink()
    sinks.push(sink)
    const account = await json('account', 'create', '--json')
    const order = await json('order', 'create', '--account', String(account.id), '--json')
    const { base } = await serveHere({ MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    const accepted: string[] = []
    let sending = true
    const sendUntilStopped = async () => {
      while (sending) {
        const res = await fetch(`${base}/mail/send`, {
          method: 'POST',
          headers: { 'X-API-KEY': account.apiKey, 'Content-Type': 'application/json' },
          body: JSON.stringify({ from: 'me@example.org', to: 'you@example.com', subject: 's', body: 'b' }),
        })
        expect(res.status).toBe(200)
        accepted.push((await res.json()).text)
      }
    }
    const senders = Array.from({ length: 4 }, sendUntilStopped)
    await expect.poll(() => accepted.length, { timeout: PROCESS_WAIT }).toBeGreaterThanOrEqual(40)
    const before = [...accepted]
    const copy = join(dataDir, 'copies', 'mailroom.db')
    mkdirSync(dirname(copy))
    const backup = await runAsync('backup', copy)
    sending = false
    await Promise.all(senders)
    const secret = join(dataDir, 'secret.key')
    expect(backup).toEqual({
      status: 0,
      stderr: '',
      stdout: `database copied to ${copy}\nKeep ${secret} with it: it encrypts the order passwords, which cannot be read from the copy without it.\n`,
    })
    expect(statSync(copy).mode & 0o777).toBe(0o600)

    // Restored as the README says: the copy as mailroom.db, with the secret.key beside it.
    copyFileSync(secret, join(dirname(copy), 'secret.key'))
    const restored = openDataDir(dirname(copy))
    try {
      expect(restored.sqlite.pragma('integrity_check', { simple: true })).toBe('ok')
      const txids = new Set(restored.sqlite.prepare('SELECT txid FROM messages').pluck().all())
      expect(before.filter((t) => !txids.has(t))).toEqual([])
      // One snapshot: no message without its log row.
      expect(
        restored.sqlite
          .prepare(
            'SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id)',
          )
          .pluck()
          .get(),
      ).toBe(0)
      expect(await restored.orders.password(order.id)).toBe(order.password)
    } finally {
      await restored.close()
    }

    // A file that exists is never overwritten.
    const bytes = readFileSync(copy)
    const again = await run('backup', copy)
    expect({ status: again.status, stdout: again.stdout, stderr: again.stderr }).toEqual({
      status: 1,
      stdout: '',
      stderr: `mailroom: ${copy} already exists: a backup never overwrites a file\n`,
    })
    expect(readFileSync(copy).equals(bytes)).toBe(true)
  })

  it('takes the server secret from MAILROOM_SECRET_KEY: the command and the server read each other, and no secret.key is made', async () => {
    const withKey = { MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') }
    const account = await jsonWith(withKey, 'account', 'create', '--json')
    const order = await jsonWith(withKey, 'order', 'create', '--account', String(account.id), '--json')
    const { base } = await serveHere(withKey)
    const headers = { 'X-API-KEY': account.apiKey }
    const detail = await (await fetch(`${base}/mail/${order.id}`, { headers })).json()
    expect(detail.password).toBe(order.password)
    // The engine thread opened the store with the same key: it takes the message.
    const sent = await fetch(`${base}/mail/send`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ from: 'me@example.org', to: 'you@example.com', subject: 's', body: 'b' }),
    })
    expect(sent.status).toBe(200)

    // The backup's reminder points at the environment, where the key is.
    const copy = join(dataDir, 'copy.db')
    const backup = await runWith(withKey, 'backup', copy)
    expect({ status: backup.status, stderr: backup.stderr, stdout: backup.stdout }).toEqual({
      status: 0,
      stderr: '',
      stdout: `database copied to ${copy}\nKeep the value of MAILROOM_SECRET_KEY (the key is in the environment, not in the data directory) with it: it encrypts the order passwords, which cannot be read from the copy without it.\n`,
    })
    expect(existsSync(join(dataDir, 'secret.key'))).toBe(false)
  })

  it('refuses a MAILROOM_SECRET_KEY that does not decrypt the stored passwords, saying which key does, and stores nothing', async () => {
    const account = await json('account', 'create', '--json')
    await json('order', 'create', '--account', String(account.id), '--json')
    const file = join(dataDir, 'secret.key')
    const other = { MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') }
    const refused = `mailroom: MAILROOM_SECRET_KEY does not decrypt the order passwords and DKIM keys stored in ${dataDir}; they were encrypted with the key in ${file}: set MAILROOM_SECRET_KEY to its content ("$(cat ${file})"), or unset it to use the file\n`
    const r = await runWith(other, 'order', 'create', '--account', String(account.id))
    expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 1, stdout: '', stderr: refused })
    await expect(serve(other)).rejects.toThrow(refused.slice('mailroom: '.length, -1))
    expect(await json('order', 'list', '--account', String(account.id), '--json')).toHaveLength(1)

    // The file's own key, moved to the environment, is the same key: it works.
    const moved = { MAILROOM_SECRET_KEY: readFileSync(file, 'utf8').trim() }
    expect(await jsonWith(moved, 'order', 'list', '--account', String(account.id), '--json')).toHaveLength(1)
    // Without the file, the message cannot name it.
    rmSync(file)
    const lost = await runWith(other, 'order', 'list', '--account', String(account.id))
    expect({ status: lost.status, stderr: lost.stderr }).toEqual({
      status: 1,
      stderr: `mailroom: MAILROOM_SECRET_KEY does not decrypt the order passwords and DKIM keys stored in ${dataDir}; they were encrypted with another key: set MAILROOM_SECRET_KEY to that one\n`,
    })

    // A DKIM key is tried as an order password is; a secret.key that encrypts nothing yet is no obstacle.
    const dkimOnly = { MAILROOM_DATA_DIR: join(dataDir, 'dkim') }
    const second = await jsonWith(dkimOnly, 'account', 'create', '--json')
    await jsonWith({ ...dkimOnly, ...other }, 'account', 'list', '--json')
    const domainArgs = ['domain', 'add', 'acme.example', '--account', String(second.id), '--algorithm', 'ed25519']
    expect((await runWith(dkimOnly, ...domainArgs)).status).toBe(0)
    const dkim = await runWith({ ...dkimOnly, ...other }, 'domain', 'list', '--account', String(second.id))
    expect({ status: dkim.status, stderr: dkim.stderr }).toEqual({
      status: 1,
      stderr: expect.stringContaining(`they were encrypted with the key in ${join(dataDir, 'dkim', 'secret.key')}`),
    })
  })

  it('stops with a message naming a bad setting', () => {
    const r = spawnSync(process.execPath, [BIN, 'serve'], {
      env: { ...env(), MAILROOM_HTTP_PORT: 'http' },
      encoding: 'utf8',
    })
    expect(r.status).toBe(1)
    expect(r.stderr).toContain('MAILROOM_HTTP_PORT')
  })

  it('stops serve, stdio and the admin commands at a misspelt setting, naming the one meant, before anything starts', async () => {
    const sink = await startSink()
    sinks.push(sink)
    const misspelt = { MAILROOM_SMARTHOTS: `127.0.0.1:${sink.port}`, MAILROOM_HTTP_PROT: '0' }
    for (const args of [['serve'], ['stdio'], ['account', 'create'], ['queue', 'list']]) {
      const r = spawnWith(misspelt, ...args)
      expect({ args, status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({
        args,
        status: 1,
        stdout: '',
        stderr:
          'mailroom: invalid configuration: MAILROOM_SMARTHOTS: no such setting (did you mean MAILROOM_SMARTHOST?); MAILROOM_HTTP_PROT: no such setting (did you mean MAILROOM_HTTP_PORT?); every setting is listed in docs/configuration.md\n',
      })
    }
    // Nothing was started: no database was made, and the sink the misspelt smarthost names saw nobody.
    expect(readdirSync(dataDir)).toEqual([])
    expect(sink.state.connections).toBe(0)
  })
})
