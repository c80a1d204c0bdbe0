import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTransport } from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mcpClient, runCli } from '../helpers.js'
import { parsePrometheusText, seriesValue } from '../prometheus-text.js'
import { senderMessage, startSenderDns } from '../relay/inbound-support.js'
import { createTestDatabase, describePostgres } from '../storage/postgres.js'
import { DNSMASQ, describeWith, startMailroom, startSmtpSink, waitFor } from './peers.js'

// The MX door of `mailroom serve` as the internet's mail servers meet it: swaks and nodemailer
// deliver to it, the senders' SPF, DKIM and DMARC records served by a dnsmasq on loopback, and
// what was stored read back through the REST and MCP doors, on SQLite and on two nodes sharing
// one PostgreSQL database.

type Node = Awaited<ReturnType<typeof startMailroom>> & { mxPort: number; apiKey: string }

/** How long a test that starts `mailroom serve` processes may take on a loaded machine. */
const PROCESS_WAIT = 120_000

const noDnsmasq = existsSync(DNSMASQ) ? undefined : `${DNSMASQ} is missing: run test/system/peers.sh`

/** `mailroom serve` with its MX door on port 0 of 127.0.0.1, once it listens; its API key when it made the first account. */
async function startNode(env: Record<string, string>): Promise<Node> {
  const node = await startMailroom({
    MAILROOM_MX_LISTEN_PORT: '0',
    MAILROOM_MX_HOSTNAME: 'mx.acme.test',
    ...env,
  })
  const mxPort = Number(/"mxPort":(\d+)/.exec(node.output())![1])
  const apiKey = /API key \(shown only now\): (\S+)/.exec(node.output())?.[1] ?? ''
  return { ...node, mxPort, apiKey }
}

/** A REST call to `node` as the first account. */
async function rest(node: Node, path: string, body?: unknown, apiKey = node.apiKey) {
  const res = await fetch(`http://127.0.0.1:${node.httpPort}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: await res.json() }
}

/** acme.test receives for account 1, made with the CLI (its sending domain and receiving) and the REST door (its inbox). */
async function receiveAtAcme(node: Node, storeEnv: Record<string, string>) {
  const a = ['--account', '1']
  for (const args of [
    ['domain', 'add', 'acme.test', ...a, '--algorithm', 'ed25519'],
    ['domain', 'receive', 'acme.test', ...a],
  ]) {
    const r = await runCli(args, storeEnv)
    expect(r.status, r.stderr).toBe(0)
  }
  const added = await rest(node, '/inboxes', { address: 'quotes@acme.test' })
  expect(added.status, JSON.stringify(added.body)).toBe(200)
}

/** nodemailer handing `raw` to the MX door as a mail server would, from `localAddress`. */
async function deliver(node: Node, raw: string, envelope: { from: string; to: string[] }, localAddress = '127.0.0.1') {
  const transport = createTransport({
    host: '127.0.0.1',
    port: node.mxPort,
    name: 'mail.sender.test',
    localAddress,
    tls: { rejectUnauthorized: false },
  })
  try {
    return await transport.sendMail({ envelope, raw })
  } finally {
    transport.close()
  }
}

/** What nodemailer was refused with: the reply's code and text. */
async function refusedDelivery(...args: Parameters<typeof deliver>) {
  try {
    await deliver(...args)
  } catch (err) {
    const { responseCode, response } = err as { responseCode?: number; response?: string }
    return { code: responseCode, text: response ?? String(err) }
  }
  throw new Error('the MX door took the message')
}

/** swaks against the MX door: its transcript (stdout and stderr) and exit status. */
function swaks(node: Node, args: string[], input?: string) {
  const r = spawnSync('swaks', ['--server', `127.0.0.1:${node.mxPort}`, '--helo', 'mail.sender.test', ...args], {
    input,
    encoding: 'utf8',
    timeout: 60_000,
  })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

/** The value of a series at the node's GET /metrics (loopback needs no token). */
async function metric(node: Node, name: string, labels: Record<string, string> = {}) {
  const res = await fetch(`http://127.0.0.1:${node.httpPort}/metrics`)
  return seriesValue(parsePrometheusText(await res.text()), name, labels) ?? Number.NaN
}

const inbound = async (node: Node, query = '') =>
  (await rest(node, `/inbound${query}`)).body as { total: number; messages: { id: string; subject: string }[] }

const ON_SQLITE = 'system: the MX door of mailroom serve, on SQLite'
describeWith(ON_SQLITE, 'dnsmasq', noDnsmasq, () => describe(ON_SQLITE, onSqlite))
const ON_POSTGRES = 'system: the MX door on two nodes sharing one PostgreSQL database'
await describePostgres(ON_POSTGRES, () =>
  describeWith(ON_POSTGRES, 'dnsmasq', noDnsmasq, () => describe(ON_POSTGRES, onTwoNodes)),
)

function onSqlite() {
  let dns: Awaited<ReturnType<typeof startSenderDns>>
  let node: Node
  let dataDir: string

  beforeAll(async () => {
    dns = await startSenderDns()
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-inbound-'))
    node = await startNode({ MAILROOM_DATA_DIR: dataDir, MAILROOM_DNS_SERVERS: dns.server })
    await receiveAtAcme(node, { MAILROOM_DATA_DIR: dataDir })
  }, PROCESS_WAIT)
  afterAll(() => {
    node?.child.kill('SIGKILL')
    dns?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** Asserts, after a refusal, that no message was stored and none was added to the log. */
  const nothingStored = async (before: number) => {
    expect((await inbound(node)).total).toBe(before)
    expect((await rest(node, '/mail/log')).body.emails).toEqual([])
  }

  it('takes a message signed by the sender domain from swaks: SPF and DKIM pass, DMARC too, counted', async () => {
    const received = await metric(node, 'mailroom_mx_messages_received_total')
    const raw = await dns.signed(senderMessage('boss@sender.test', 'signed by swaks'))
    const { status, out } = swaks(node, ['--from', 'boss@sender.test', '--to', 'quotes@acme.test', '--data', '-'], raw)
    expect(status, out).toBe(0)
    const id = /<[-~] +250 2\.0\.0 Message received as (in_[0-9a-f]+)/.exec(out)?.[1]
    expect(id, out).toBeDefined()
    const { status: got, body } = await rest(node, `/inbound/${id}`)
    expect(got).toBe(200)
    expect(body).toMatchObject({
      inbox: 'quotes@acme.test',
      subject: 'signed by swaks',
      from: { address: 'boss@sender.test', name: 'Boss' },
      mailFrom: 'boss@sender.test',
      auth: {
        spf: { result: 'pass', domain: 'sender.test' },
        dkim: [{ result: 'pass', domain: 'sender.test', selector: 's1' }],
        dmarc: { result: 'pass', policy: 'reject', domain: 'sender.test' },
      },
    })
    expect(await metric(node, 'mailroom_mx_messages_received_total')).toBe(received + 1)
  })

  it('commits messages arriving at once on several connections, each before its 250', async () => {
    const before = (await inbound(node)).total
    const subjects = Array.from({ length: 8 }, (_, i) => `at once ${i}`)
    const infos = await Promise.all(
      subjects.map(async (subject) =>
        deliver(node, await dns.signed(senderMessage('boss@sender.test', subject)), {
          from: 'boss@sender.test',
          to: ['quotes@acme.test'],
        }),
      ),
    )
    const ids = infos.map((info) => /^250 2\.0\.0 Message received as (in_[0-9a-f]+)$/.exec(info.response)?.[1])
    expect(new Set(ids).size).toBe(subjects.length)
    // Read at once, each by the id its 250 gave: acknowledged means committed.
    const got = await Promise.all(ids.map(async (id) => (await rest(node, `/inbound/${id}`)).body))
    expect(got.map((m) => m.subject)).toEqual(subjects)
    expect((await inbound(node)).total).toBe(before + subjects.length)
  })

  it('shows a signature forged by changing the message after signing as DKIM fail (nodemailer)', async () => {
    const raw = (await dns.signed(senderMessage('boss@sender.test', 'the quote'))).replace(
      'Subject: the quote',
      'Subject: pay this invoice',
    )
    const info = await deliver(node, raw, { from: 'boss@sender.test', to: ['quotes@acme.test'] })
    const id = /Message received as (in_[0-9a-f]+)/.exec(info.response)![1]
    const { body } = await rest(node, `/inbound/${id}`)
    expect(body.subject).toBe('pay this invoice')
    expect(body.auth.dkim).toEqual([{ result: 'fail', domain: 'sender.test', selector: 's1' }])
    // Sent from the address sender.test's SPF names: SPF passes and aligns, so DMARC passes.
    expect(body.auth.spf.result).toBe('pass')
    expect(body.auth.dmarc.result).toBe('pass')
  })

  it('gives SPF by the connecting address: fail from one the domain does not name (p=none: taken)', async () => {
    const pass = await deliver(node, senderMessage('boss@lenient.test', 'lenient from .1'), {
      from: 'boss@lenient.test',
      to: ['quotes@acme.test'],
    })
    const fail = await deliver(
      node,
      senderMessage('boss@lenient.test', 'lenient from .2'),
      { from: 'boss@lenient.test', to: ['quotes@acme.test'] },
      '127.0.0.2',
    )
    const auth = async (info: { response: string }) =>
      (await rest(node, `/inbound/${/Message received as (in_[0-9a-f]+)/.exec(info.response)![1]}`)).body.auth
    expect(await auth(pass)).toMatchObject({ spf: { result: 'pass', domain: 'lenient.test' } })
    expect(await auth(fail)).toMatchObject({
      spf: { result: 'fail', domain: 'lenient.test' },
      dkim: [],
      dmarc: { result: 'fail', policy: 'none', domain: 'lenient.test' },
    })
  })

  it('refuses at DATA a message failing DMARC under p=reject, storing nothing', async () => {
    const before = (await inbound(node)).total
    const counted = await metric(node, 'mailroom_mx_refused_total', { reason: 'dmarc_reject' })
    // From sender.test, unsigned, from an address its SPF does not name.
    const refused = await refusedDelivery(
      node,
      senderMessage('boss@sender.test', 'forged boss'),
      { from: 'boss@sender.test', to: ['quotes@acme.test'] },
      '127.0.0.2',
    )
    expect(refused.code).toBe(550)
    expect(refused.text).toMatch(
      /^550 5\.7\.1 Message refused: the DMARC policy of sender\.test is reject, and it failed DMARC \(SPF fail for sender\.test, DKIM none\)/,
    )
    await nothingStored(before)
    expect((await inbound(node, '?from=boss@sender.test')).messages.map((m) => m.subject)).not.toContain('forged boss')
    expect(await metric(node, 'mailroom_mx_refused_total', { reason: 'dmarc_reject' })).toBe(counted + 1)
  })

  it('refuses at RCPT an address that is no inbox and a domain nobody receives for, storing nothing', async () => {
    const before = (await inbound(node)).total
    const at = async (reason: string) => metric(node, 'mailroom_mx_refused_total', { reason })
    const counts = [await at('no_such_mailbox'), await at('relay_denied')]
    const unknown = swaks(node, ['--from', 'boss@sender.test', '--to', 'nobody@acme.test'])
    expect(unknown.status, unknown.out).not.toBe(0)
    expect(unknown.out).toMatch(/<\*\* +550 5\.1\.1 No such mailbox: nobody@acme\.test/)
    const foreign = await refusedDelivery(node, senderMessage(), { from: 'boss@sender.test', to: ['x@elsewhere.test'] })
    expect(foreign).toMatchObject({ code: 550 })
    expect(foreign.text).toMatch(/^550 5\.7\.1 x@elsewhere\.test: relay not permitted/)
    await nothingStored(before)
    expect([await at('no_such_mailbox'), await at('relay_denied')]).toEqual([counts[0] + 1, counts[1] + 1])
  })

  it('is no open relay: mail for the internet is refused, even from an inbox of its own domain', async () => {
    const before = (await inbound(node)).total
    for (const [to, refusal] of [
      ['victim@example.com', '550 5.7.1 victim@example.com: relay not permitted'],
      // The percent hack names a mailbox at the receiving domain, which it is not.
      ['victim%example.com@acme.test', '550 5.1.1 No such mailbox: victim%example.com@acme.test'],
    ]) {
      const { status, out } = swaks(node, ['--from', 'quotes@acme.test', '--to', to])
      expect(status, out).not.toBe(0)
      expect(out).toContain(`<** ${refusal}`)
      expect(out).not.toMatch(/<- +354/)
    }
    await nothingStored(before)
  })

  it('takes postmaster at a receiving domain that has no such inbox (RFC 5321 §4.5.1)', async () => {
    const { status, out } = swaks(node, [
      '--from',
      'boss@lenient.test',
      '--to',
      'Postmaster@acme.test',
      '--header',
      'Subject: to the postmaster',
    ])
    expect(status, out).toBe(0)
    const { messages } = await inbound(node, '?inbox=postmaster@acme.test')
    expect(messages.map((m) => m.subject)).toEqual(['to the postmaster'])
  })
}

function onTwoNodes() {
  const cleanup: (() => unknown)[] = []
  let dns: Awaited<ReturnType<typeof startSenderDns>>
  let one: Node
  let two: Node
  let sink: Awaited<ReturnType<typeof startSmtpSink>>

  beforeAll(async () => {
    dns = await startSenderDns()
    cleanup.push(dns.stop)
    sink = await startSmtpSink()
    cleanup.push(sink.stop)
    const db = await createTestDatabase()
    cleanup.push(db.drop)
    const store = { MAILROOM_DATABASE_URL: db.url, MAILROOM_SECRET_KEY: randomBytes(32).toString('base64') }
    const start = async (name: string) => {
      const parent = mkdtempSync(join(tmpdir(), `mailroom-${name}-`))
      cleanup.push(() => rmSync(parent, { recursive: true, force: true }))
      const node = await startNode({
        ...store,
        MAILROOM_DATA_DIR: join(parent, 'data'),
        MAILROOM_NODE_NAME: name,
        MAILROOM_DNS_SERVERS: dns.server,
        MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      })
      cleanup.push(() => node.child.kill('SIGKILL'))
      return node
    }
    // The first node makes the database's first account; the second starts beside it.
    one = await start('node-1')
    await waitFor(async () => /Try it/.test(one.output()))
    one = { ...one, apiKey: /API key \(shown only now\): (\S+)/.exec(one.output())![1] }
    two = { ...(await start('node-2')), apiKey: one.apiKey }
    await receiveAtAcme(one, store)
  }, PROCESS_WAIT)
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  it("reads and answers through node 2's REST and MCP a message and its reply received by node 1's MX door", async () => {
    const first = await deliver(one, await dns.signed(senderMessage('boss@sender.test', 'the quote')), {
      from: 'boss@sender.test',
      to: ['quotes@acme.test'],
    })
    expect(first.response).toMatch(/^250 2\.0\.0 Message received as in_/)
    const reply = [
      'From: Boss <boss@sender.test>',
      'To: quotes@acme.test',
      'Subject: Re: the quote',
      'Message-ID: <q2@sender.test>',
      'In-Reply-To: <q1@sender.test>',
      'References: <q1@sender.test>',
      'Date: Mon, 02 Nov 2026 11:00:00 +0000',
      '',
      'Thanks, that works.',
      '',
      '> Please send the quote.',
      '',
    ].join('\r\n')
    await deliver(one, await dns.signed(reply), { from: 'boss@sender.test', to: ['quotes@acme.test'] })

    const listed = await inbound(two, '?inbox=quotes@acme.test')
    expect(listed.messages.map((m) => m.subject)).toEqual(['Re: the quote', 'the quote'])
    const { status, body } = await rest(two, `/inbound/${listed.messages[0].id}`)
    expect(status).toBe(200)
    expect(body).toMatchObject({
      inReplyTo: 'q1@sender.test',
      extractedText: 'Thanks, that works.',
      auth: { spf: { result: 'pass' }, dkim: [{ result: 'pass' }], dmarc: { result: 'pass' } },
    })

    const mcp = await mcpClient(`http://127.0.0.1:${two.httpPort}`, two.apiKey)
    try {
      const got = await mcp.callTool({ name: 'getInboundMessage', arguments: { id: listed.messages[1].id } })
      expect(got.isError ?? false).toBe(false)
      const message = got.structuredContent as { threadId: string; subject: string; auth: { dkim: unknown[] } }
      expect(message).toMatchObject({
        subject: 'the quote',
        auth: { dkim: [{ result: 'pass', domain: 'sender.test' }] },
      })
      const thread = await mcp.callTool({ name: 'getThread', arguments: { id: message.threadId } })
      const { messages } = thread.structuredContent as {
        messages: { direction: string; message: { subject: string } }[]
      }
      expect(messages.map((m) => [m.direction, m.message.subject])).toEqual([
        ['received', 'the quote'],
        ['received', 'Re: the quote'],
      ])

      // Answered through node 2: the answer leaves for the sink, and node 1 sees it in the thread.
      const answered = await mcp.callTool({
        name: 'replyToMessage',
        arguments: { id: listed.messages[0].id, text: 'Glad it does.' },
      })
      expect(answered.isError ?? false).toBe(false)
      // smtp-sink writes a message's file as it arrives: wait for the whole of it, body included.
      const answer = () => sink.messages().find((m) => m.text.includes('Glad it does.'))
      await waitFor(async () => answer() !== undefined)
      const sent = answer()!
      expect(sink.count()).toBe(1)
      expect(sent.from).toBe('quotes@acme.test')
      expect(sent.text).toMatch(/^In-Reply-To: <q2@sender\.test>\r?$/m)
      expect(sent.text).toMatch(/^Subject: Re: the quote\r?$/m)
      const { body: seen } = await rest(one, `/threads/${message.threadId}`)
      expect((seen as { messages: { direction: string }[] }).messages.map((m) => m.direction)).toEqual([
        'received',
        'received',
        'sent',
      ])
    } finally {
      await mcp.close()
    }
    expect(await metric(one, 'mailroom_mx_messages_received_total')).toBe(2)
    expect(await metric(two, 'mailroom_mx_messages_received_total')).toBe(0)
  })

  it('refuses through the MX door of node 2 what node 1 was told nothing about, storing nothing', async () => {
    const before = (await inbound(one)).total
    const refused = await refusedDelivery(two, senderMessage(), { from: 'boss@sender.test', to: ['nobody@acme.test'] })
    expect(refused).toMatchObject({ code: 550 })
    expect(refused.text).toMatch(/^550 5\.1\.1 No such mailbox: nobody@acme\.test/)
    expect((await inbound(one)).total).toBe(before)
  })
}
