import { rmSync } from 'node:fs'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SANDBOX_DOMAIN, sandboxAttempt } from '../../relay/sandbox.js'
import type { QueueItem } from '../../storage/store.js'
import type { RunningServer } from '../../serve.js'
import { mcpClient, runCli, startTestServer } from '../helpers.js'
import { startSink } from './sink.js'

type LogRow = {
  id: string
  from: string
  recipient: string
  transtype: string
  delivered: number
  code: number | null
  response: string | null
  mxHostname: string | null
}

describe('sandbox replies', () => {
  const item = (recipient: string, attempts: number): QueueItem => ({
    id: 1,
    messageRowId: 1,
    txid: 't',
    accountId: 1,
    orderId: 1,
    envFrom: 'agent@example.org',
    recipient,
    domain: recipient.slice(recipient.indexOf('@') + 1),
    attempts,
    queuedAt: 0,
    delayReported: false,
    sandbox: true,
  })
  it.each([
    ['bob@example.com', 0, 250, /^250 2\.0\.0 sandbox: accepted and not sent/],
    ['bob@example.com', 3, 250, /^250 /],
    [`bounce@${SANDBOX_DOMAIN}`, 0, 550, /^550 5\.1\.1 <bounce@sandbox\.mailroom\.invalid>: sandbox: no such mailbox/],
    [`Bounce@${SANDBOX_DOMAIN.toUpperCase()}`, 1, 550, /^550 5\.1\.1 /],
    [`defer@${SANDBOX_DOMAIN}`, 0, 451, /^451 4\.3\.0 <defer@sandbox\.mailroom\.invalid>: sandbox: try again later/],
    [`defer@${SANDBOX_DOMAIN}`, 1, 250, /^250 2\.0\.0 sandbox/],
    [`other@${SANDBOX_DOMAIN}`, 0, 250, /^250 /],
  ])('%s at attempt %i: %i', (recipient, attempts, code, response) => {
    const attempt = sandboxAttempt([item(recipient, attempts)])
    expect(attempt.mxHostname).toBeNull()
    expect(attempt.replies.get(recipient)).toEqual({ code, response: expect.stringMatching(response), toRcpt: true })
  })
})

// `mailroom serve` in process with a smarthost: a real SMTP sink that counts every connection.
// Sandbox mail must reach it never; a normal key's mail still does.
describe('the sandbox', () => {
  let dataDir: string
  let server: RunningServer
  let sink: Awaited<ReturnType<typeof startSink>>
  let base: string
  let apiKey: string
  let sandboxKey: string
  let sandboxOrder: { id: number; username: string; password: string; sandbox: boolean }

  /** The `mailroom` command on the server's data directory, as an operator runs it (in this process: runCli). */
  const mailroom = async (...args: string[]) => {
    const r = await runCli(args, { MAILROOM_DATA_DIR: dataDir })
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    return r.stdout
  }

  beforeAll(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-sandbox-', {
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_RETRY_SCHEDULE: '1s',
    })
    ;({ server, dataDir, apiKey } = started)
    base = `http://127.0.0.1:${server.httpPort}`
    const key = JSON.parse(await mailroom('account', 'key', 'create', '--account', '1', '--sandbox', '--json'))
    expect(key).toMatchObject({ account: 1, sandbox: true })
    sandboxKey = key.apiKey
    sandboxOrder = JSON.parse(await mailroom('order', 'create', '--account', '1', '--sandbox', '--json'))
    expect(sandboxOrder).toMatchObject({ status: 'active', sandbox: true })
  })
  afterAll(async () => {
    await server?.stop()
    await sink?.close()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  const headers = (key: string) => ({ 'X-API-KEY': key, 'Content-Type': 'application/json' })
  const send = (key: string, body: Record<string, unknown>, path = '/mail/send') =>
    fetch(`${base}${path}`, { method: 'POST', headers: headers(key), body: JSON.stringify(body) })
  const log = async (query: string): Promise<LogRow[]> =>
    (await (await fetch(`${base}/mail/log?${query}`, { headers: headers(apiKey) })).json()).emails
  /** The log rows of a transaction once every one is final (delivered or failed). */
  const final = async (txid: string, order = 1): Promise<LogRow[]> => {
    let rows: LogRow[] = []
    await expect
      .poll(
        async () => {
          rows = await log(`mailid=${txid}&id=${order}`)
          return rows.length > 0 && rows.every((r) => r.delivered === 1 || (r.code !== null && r.code >= 500))
        },
        { timeout: 15_000, interval: 50 },
      )
      .toBe(true)
    return rows
  }
  const sandboxDelivered = {
    delivered: 1,
    code: 250,
    response: expect.stringMatching(/^250 2\.0\.0 sandbox: accepted and not sent/),
    mxHostname: null,
  }
  const nothingLeft = () => {
    expect(sink.state.connections).toBe(0)
    expect(sink.messages).toEqual([])
  }

  it('lists the sandbox key and the sandbox order as such', async () => {
    const keys = JSON.parse(await mailroom('account', 'key', 'list', '--account', '1', '--json'))
    expect(keys.map((k: { sandbox: boolean; revoked: boolean }) => [k.sandbox, k.revoked])).toEqual([
      [false, false],
      [true, false],
    ])
    expect((await mailroom('account', 'key', 'list', '--account', '1')).trim().split('\n')[1]).toMatch(
      /\tactive\tsandbox$/,
    )
    const orders = JSON.parse(await mailroom('order', 'list', '--account', '1', '--json'))
    expect(orders.map((o: { id: number; sandbox: boolean }) => [o.id, o.sandbox])).toEqual([
      [1, false],
      [sandboxOrder.id, true],
    ])
    expect(await mailroom('order', 'list', '--account', '1')).toContain(`${sandboxOrder.username}\tactive (sandbox)\t`)
    // The API shows it where it shows an order; a real order is as the contract has it.
    const listed = await (await fetch(`${base}/mail`, { headers: headers(apiKey) })).json()
    expect(listed).toEqual([
      { id: 1, status: 'active', username: 'mb1', comment: 'created on first start' },
      { id: sandboxOrder.id, status: 'active', username: sandboxOrder.username, sandbox: true },
    ])
    const one = await (await fetch(`${base}/mail/${sandboxOrder.id}`, { headers: headers(apiKey) })).json()
    expect(one).toMatchObject({ id: sandboxOrder.id, sandbox: true, password: sandboxOrder.password })
  })

  it("a sandbox key's REST send is in the log as delivered, and reaches no server", async () => {
    const res = await send(sandboxKey, {
      from: 'agent@example.org',
      to: ['bob@example.com', 'carol@example.net'],
      subject: 'sandbox via REST',
      body: 'hi',
    })
    expect(res.status).toBe(200)
    const { text: txid } = await res.json()
    const rows = await final(txid)
    expect(rows.map((r) => r.recipient).sort()).toEqual(['bob@example.com', 'carol@example.net'])
    for (const row of rows) expect(row).toMatchObject({ ...sandboxDelivered, transtype: 'HTTP' })
    nothingLeft()
  })

  it("a sandbox key's MCP send likewise", async () => {
    const client = await mcpClient(base, sandboxKey)
    const result = await client.callTool({
      name: 'sendAdvMail',
      arguments: { from: { email: 'agent@example.org' }, to: 'Bob <bob@example.com>', subject: 'via MCP', body: 'hi' },
    })
    await client.close()
    expect(result.isError).toBeFalsy()
    const txid = (result.structuredContent as { text: string }).text
    expect(await final(txid)).toMatchObject([{ ...sandboxDelivered, recipient: 'bob@example.com' }])
    nothingLeft()
  })

  it("a sandbox order's mail is sandbox mail over SMTP, and over REST with a normal key", async () => {
    const transport = nodemailer.createTransport({
      host: '127.0.0.1',
      port: server.smtpPort,
      secure: false,
      requireTLS: true,
      auth: { user: sandboxOrder.username, pass: sandboxOrder.password },
      tls: { rejectUnauthorized: false },
    })
    const info = await transport.sendMail({
      from: 'agent@example.org',
      to: 'bob@example.com',
      subject: 'via SMTP',
      text: 'hi',
    })
    transport.close()
    const smtpTxid = /Message queued as ([0-9a-f]{18,19})/.exec(info.response)![1]
    expect(await final(smtpTxid, sandboxOrder.id)).toMatchObject([{ ...sandboxDelivered, transtype: 'ESMTPSA' }])

    const res = await send(apiKey, {
      id: sandboxOrder.id,
      from: 'agent@example.org',
      to: 'bob@example.com',
      subject: 's',
      body: 'b',
    })
    expect(res.status).toBe(200)
    expect(await final((await res.json()).text, sandboxOrder.id)).toMatchObject([sandboxDelivered])
    nothingLeft()
  })

  it(`bounce@${SANDBOX_DOMAIN} fails with 550 5.1.1: a report to the sender, in the sandbox too, and a suppression`, async () => {
    const bounce = `bounce@${SANDBOX_DOMAIN}`
    const res = await send(sandboxKey, {
      from: 'agent@example.org',
      to: [bounce, 'bob@example.com'],
      subject: 'rehearse a bounce',
      body: 'b',
    })
    const { text: txid } = await res.json()
    const rows = await final(txid)
    expect(rows.find((r) => r.recipient === bounce)).toMatchObject({
      delivered: 0,
      code: 550,
      response: expect.stringMatching(/^550 5\.1\.1 <bounce@sandbox\.mailroom\.invalid>: sandbox: no such mailbox/),
      mxHostname: null,
    })
    expect(rows.find((r) => r.recipient === 'bob@example.com')).toMatchObject(sandboxDelivered)
    // The report goes to the sender like any report, and is sandbox mail itself: delivered here, sent nowhere.
    let reports: LogRow[] = []
    await expect
      .poll(async () => (reports = await log('subject=Undelivered Mail Returned to Sender')).length, {
        timeout: 15_000,
      })
      .toBe(1)
    const [report] = await final(reports[0].id)
    expect(report).toMatchObject({ ...sandboxDelivered, from: '', recipient: 'agent@example.org', transtype: 'DSN' })
    // The bounced address is suppressed: the next message to it is refused, and nothing is stored.
    const before = (await log('limit=1000')).length
    const again = await send(sandboxKey, { from: 'agent@example.org', to: bounce, subject: 'again', body: 'b' })
    expect(again.status).toBe(400)
    expect((await again.json()).message).toMatch(
      /^to: recipient bounce@sandbox\.mailroom\.invalid is on this account's local block list \(an earlier message to it bounced: 550 5\.1\.1/,
    )
    expect((await log('limit=1000')).length).toBe(before)
    nothingLeft()
  })

  it(`defer@${SANDBOX_DOMAIN} is deferred once, then delivered`, async () => {
    const res = await send(sandboxKey, {
      from: 'agent@example.org',
      to: `defer@${SANDBOX_DOMAIN}`,
      subject: 'rehearse a delay',
      body: 'b',
    })
    const { text: txid } = await res.json()
    await expect.poll(async () => (await log(`mailid=${txid}`))[0]?.code, { timeout: 10_000, interval: 20 }).toBe(451)
    expect((await log(`mailid=${txid}`))[0]).toMatchObject({
      delivered: 0,
      response: expect.stringMatching(/^451 4\.3\.0 <defer@sandbox\.mailroom\.invalid>: sandbox: try again later/),
    })
    expect(await final(txid)).toMatchObject([sandboxDelivered])
    nothingLeft()
  })

  it('refuses a sandbox send as any other: a deny rule stops it, and nothing is stored', async () => {
    const { text: ruleId } = await (
      await send(sandboxKey, { type: 'email', data: 'denied@example.org' }, '/mail/rules')
    ).json()
    const before = (await log('limit=1000')).length
    const res = await send(sandboxKey, { from: 'denied@example.org', to: 'bob@example.com', subject: 's', body: 'b' })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      code: 400,
      message: `from: sender denied@example.org is rejected by deny rule ${ruleId} (email denied@example.org)`,
    })
    expect((await log('limit=1000')).length).toBe(before)
    nothingLeft()
  })

  it("a normal key's send still goes out", async () => {
    const res = await send(apiKey, { from: 'me@example.org', to: 'bob@example.com', subject: 'real mail', body: 'b' })
    const rows = await final((await res.json()).text)
    expect(rows).toMatchObject([{ delivered: 1, code: 250, mxHostname: '127.0.0.1' }])
    expect(rows[0].response).not.toMatch(/sandbox/)
    expect(sink.messages.map((m) => m.to)).toEqual([['bob@example.com']])
    expect(sink.state.connections).toBeGreaterThan(0)
  })
})
