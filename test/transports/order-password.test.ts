import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { rmSync } from 'node:fs'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createOrder } from '../../accounts.js'
import { openRuntime } from '../../runtime.js'
import type { RunningServer } from '../../serve.js'
import { mcpClient, silentLogger, startTestServer } from '../helpers.js'
import { expectMatchesUpstream } from '../openapi.js'
import { startSink } from '../relay/sink.js'
import { refusal, SmtpClient } from '../relay/submission-client.js'
import { mcpWithToken, overHttp, tokensFor } from './oauth-flow.js'

const WITHHELD = '********'

// #35 item 9: an order's SMTP password sends what the order sends, over SMTP, outside the limits
// of the caller that read it. `mailroom serve` as built, delivering to a real SMTP sink.
describe("a mail order's SMTP password", () => {
  let sink: Awaited<ReturnType<typeof startSink>>
  let server: RunningServer
  let dataDir: string
  let apiKey: string
  let password: string
  let base: string
  let sandboxKey: string
  let sandboxOrder: { id: number; password: string }
  const clients: Client[] = []

  beforeEach(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-password-', { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    ;({ server, dataDir, apiKey } = started)
    password = started.smtp.pass
    base = `http://127.0.0.1:${server.httpPort}`
    const admin = await openRuntime(started.config, { logger: silentLogger })
    sandboxKey = (await admin.store.apiKeys.create(1, Date.now(), { sandbox: true })).key
    const made = await createOrder(admin, 1, null, [], { sandbox: true })
    sandboxOrder = { id: made.order.id, password: made.password }
    await admin.close()
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
    await server.stop()
    await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const get = async (path: string, headers: Record<string, string>) => {
    const res = await fetch(`${base}${path}`, { headers })
    return { status: res.status, body: await res.json() }
  }
  const post = async (path: string, headers: Record<string, string>) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers })
    return { status: res.status, body: await res.json() }
  }
  /** A tool's result over MCP: its structured content, or its error. */
  const mcpCall = async (client: Client, name: string, args: object) => {
    const result = await client.callTool({ name, arguments: args })
    if (result.isError) return { error: JSON.parse((result.content as { text: string }[])[0].text) }
    return { result: result.structuredContent as Record<string, unknown> }
  }
  /** A tool's result over MCP with an access token, session-less. */
  const mcpToken = async (accessToken: string, name: string, args: object) => {
    const res = await mcpWithToken(overHttp(base), accessToken, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name, arguments: args },
    })
    const text = await res.text()
    const message = JSON.parse(text.slice(text.indexOf('{')))
    if (message.error) return { status: res.status, error: message.error.data ?? message.error }
    const result = message.result
    if (result.isError) return { status: res.status, error: JSON.parse(result.content[0].text) }
    return { status: res.status, result: result.structuredContent as Record<string, unknown> }
  }
  /** The resources the server's tokens are bound to: its REST API and its MCP endpoint (its public URL's default). */
  const resources = () => {
    const publicUrl = `http://localhost:${server.httpPort}`
    return { rest: publicUrl, mcp: `${publicUrl}/mcp` }
  }
  /** Logs in over SMTP submission (STARTTLS, AUTH PLAIN) and sends one message; the client's error if refused. */
  const smtpSend = async (user: string, pass: string, subject: string) => {
    const client = await SmtpClient.open(server.smtpPort)
    try {
      await client.login(user, pass)
      await client.send(
        { from: 'me@example.org', to: ['bob@example.com'] },
        `From: me@example.org\r\nTo: bob@example.com\r\nSubject: ${subject}\r\n\r\nhello\r\n`,
      )
    } finally {
      client.close()
    }
  }
  const sunk = (subject: string) => sink.messages.filter((m) => m.raw.includes(`Subject: ${subject}`))

  it('is withheld, with the reason, from every caller that may not send real mail; nothing real can be sent with what they see', async () => {
    const { rest, mcp } = resources()
    const app = overHttp(base)
    const sandboxGrant = await tokensFor(app, sandboxKey, { resource: rest })
    const readOnly = await tokensFor(app, apiKey, { resource: mcp, scope: 'mail:read' })
    const sandboxMcp = await mcpClient(base, sandboxKey)
    clients.push(sandboxMcp)

    const seen = [
      (await get('/mail/1', { 'X-API-KEY': sandboxKey })).body,
      (await get('/mail/1', { Authorization: `Bearer ${sandboxGrant.access_token}` })).body,
      (await mcpCall(sandboxMcp, 'getMailOrderById', { id: 1 })).result,
      (await mcpToken(readOnly.access_token, 'getMailOrderById', { id: 1 })).result,
    ]
    for (const body of seen) {
      expect(body).toEqual({
        id: 1,
        status: 'active',
        username: 'mb1',
        comment: 'created on first start',
        password: WITHHELD,
        passwordWithheld: expect.stringMatching(/^the password sends (real )?mail, and this /),
      })
      expect(JSON.stringify(body)).not.toContain(password)
    }
    expect(seen[0].passwordWithheld).toMatch(/this caller is a sandbox key/)
    expect(seen[1].passwordWithheld).toMatch(/this caller is a sandbox key/)
    expect(seen[3]!.passwordWithheld).toMatch(/not granted the mail:send scope/)
    await expectMatchesUpstream('getMailOrderById', 200, seen[0])

    // What they saw logs in nowhere, and nothing reaches the destination.
    const refused = await refusal(smtpSend('mb1', WITHHELD, 'escape'))
    expect(refused.responseCode).toBe(535)
    expect(sunk('escape')).toEqual([])

    // A full key, and a token that may send with a real key, read the password; it sends real mail.
    const full = await get('/mail/1', { 'X-API-KEY': apiKey })
    expect(full.body).toEqual({ id: 1, status: 'active', username: 'mb1', comment: expect.any(String), password })
    await expectMatchesUpstream('getMailOrderById', 200, full.body)
    const sender = await tokensFor(app, apiKey, { resource: mcp, scope: 'mail:read mail:send' })
    expect((await mcpToken(sender.access_token, 'getMailOrderById', { id: 1 })).result?.password).toBe(password)
    await smtpSend('mb1', password, 'allowed')
    await expect.poll(() => sunk('allowed').length, { timeout: 15_000 }).toBe(1)
  })

  it('is shown to a sandbox key for a sandbox order, whose mail never leaves', async () => {
    const res = await get(`/mail/${sandboxOrder.id}`, { 'X-API-KEY': sandboxKey })
    expect(res.body).toMatchObject({ id: sandboxOrder.id, sandbox: true, password: sandboxOrder.password })
    expect(res.body).not.toHaveProperty('passwordWithheld')
  })

  it('is replaced by rotateOrderPassword: the new one logs in at once, the old one no longer', async () => {
    const rotated = await post('/mail/1/password', { 'X-API-KEY': apiKey })
    expect(rotated.status).toBe(200)
    expect(rotated.body).toEqual({
      id: 1,
      status: 'active',
      username: 'mb1',
      comment: 'created on first start',
      password: expect.any(String),
    })
    const fresh = rotated.body.password as string
    expect(fresh).not.toBe(password)
    expect(fresh.length).toBeGreaterThanOrEqual(20)
    expect((await get('/mail/1', { 'X-API-KEY': apiKey })).body.password).toBe(fresh)

    const old = await refusal(smtpSend('mb1', password, 'old password'))
    expect(old.responseCode).toBe(535)
    await smtpSend('mb1', fresh, 'new password')
    await expect.poll(() => sunk('new password').length, { timeout: 15_000 }).toBe(1)
    expect(sunk('old password')).toEqual([])

    // Over MCP too, with the key's own session.
    const client = await mcpClient(base, apiKey)
    clients.push(client)
    const again = await mcpCall(client, 'rotateOrderPassword', { id: 1 })
    expect(again.result?.password).toEqual(expect.any(String))
    expect(again.result?.password).not.toBe(fresh)
    expect((await get('/mail/1', { 'X-API-KEY': apiKey })).body.password).toBe(again.result?.password)
  })

  it('is not replaced for a caller that may not read it: a 403 saying why, and the password stays', async () => {
    const { rest, mcp } = resources()
    const app = overHttp(base)
    const manageOnly = await tokensFor(app, apiKey, { resource: rest, scope: 'mail:read mail:manage' })
    const readOnly = await tokensFor(app, apiKey, { resource: mcp, scope: 'mail:read' })
    const sandboxMcp = await mcpClient(base, sandboxKey)
    clients.push(sandboxMcp)

    const bySandboxKey = await post('/mail/1/password', { 'X-API-KEY': sandboxKey })
    expect(bySandboxKey).toEqual({
      status: 403,
      body: {
        code: 403,
        message: expect.stringMatching(
          /^id: mail order 1: not rotated: the password sends real mail, and this caller is a sandbox key/,
        ),
      },
    })
    expect((await mcpCall(sandboxMcp, 'rotateOrderPassword', { id: 1 })).error).toMatchObject({ code: 403 })
    const byManageOnly = await post('/mail/1/password', { Authorization: `Bearer ${manageOnly.access_token}` })
    expect(byManageOnly.status).toBe(403)
    expect(byManageOnly.body.message).toMatch(/not rotated: .*not granted the mail:send scope/)
    // Without mail:manage the tool is out of the token's scope altogether.
    const byReadOnly = await mcpToken(readOnly.access_token, 'rotateOrderPassword', { id: 1 })
    expect(byReadOnly.status).toBe(403)
    expect(JSON.stringify(byReadOnly.error)).toContain('needs the mail:manage scope')

    expect((await get('/mail/1', { 'X-API-KEY': apiKey })).body.password).toBe(password)
    await smtpSend('mb1', password, 'still works')
    await expect.poll(() => sunk('still works').length, { timeout: 15_000 }).toBe(1)
  })
})
