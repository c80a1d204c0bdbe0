import { serve, type ServerType } from '@hono/node-server'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import Ajv from 'ajv'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { ZodType } from 'zod'
import { generateDkimKey } from '../../relay/dkim.js'
import type { SqliteStore } from '../../storage/sqlite/index.js'
import { messageWithAttachment } from '../tools/inbound-support.js'
import { inboundMessage } from '../storage/contract/inbound.js'
import { TOOLS } from '../../tools/index.js'
import { jsonSchemaOf } from '../../transports/json-schema.js'
import { isObject } from '../../transports/json-schema.js'
import { MCP_SESSION_IDLE_MS, MCP_SESSION_TOUCH_MS, MCP_SESSIONS_PER_ACCOUNT } from '../../transports/mcp-http.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { extensionsOf } from '../openapi.js'
import { startDnsmasq } from '../system/peers.js'
import { holdMessage } from '../tools/held.js'
import { expectNothingQueued, run } from '../tools/support.js'

const byName = (name: string) => TOOLS.find((t) => t.name === name)!
/** The tools beyond the hosted service's contract. */
const EXTENSIONS = extensionsOf(TOOLS.map((t) => t.name))

/** Arguments that make each tool succeed for a fresh test account that sent `txid`. */
function happyArgs(
  env: TestEnv,
  ruleId: string,
  txid: string,
  webhookId = 1,
  received = { id: 'in_0', threadId: 'th_0' },
  held = { approve: '0190f3a2b4c5d6e7f8', reject: '0190f3a2b4c5d6e7f9' },
): Record<string, Record<string, unknown>> {
  return {
    pingServer: {},
    getMailOrders: {},
    getMailOrderById: { id: env.orderId },
    sendMail: { to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'hello' },
    sendAdvMail: {
      from: { email: 'me@example.org', name: 'Me' },
      to: 'Bob <bob@example.com>',
      bcc: [{ email: 'audit@example.net' }],
      subject: 'hi',
      body: '<p>hello</p>',
    },
    rawMail: { raw_email: 'From: me@example.org\r\nTo: bob@example.com\r\nSubject: raw\r\n\r\nbody\r\n' },
    viewMailLog: { limit: 5 },
    getStats: { time: 'all' },
    getMailBlocks: {},
    delistBlock: { email: 'blocked@example.org' },
    getRules: {},
    addRule: { type: 'domain', data: 'spam.example' },
    deleteRule: { ruleId: Number(ruleId) },
    addWebhook: { url: 'https://hooks.example.com/mailroom', events: ['message.delivered'] },
    getWebhooks: {},
    deleteWebhook: { id: webhookId },
    getMessage: { id: txid },
    getVolume: { interval: 'hour' },
    rotateOrderPassword: { id: env.orderId },
    getSuppressions: { limit: 10 },
    createMailOrder: { comment: 'more', senders: ['@example.org'] },
    cancelMailOrder: { id: env.orderId + 1 },
    getApiKeys: {},
    createApiKey: { sandbox: true },
    revokeApiKey: { id: 2 },
    getDomains: {},
    checkDomain: { domain: 'inside.test' },
    getMessageContent: { id: txid },
    setDomainReceiving: { domain: 'inside.test' },
    addInbox: { address: 'agent@inside.test' },
    getInboxes: {},
    deleteInbox: { id: 2 },
    listInboundMessages: { since: 'yesterday' },
    getInboundMessage: { id: received.id },
    getAttachment: { id: received.id, index: 0 },
    getThread: { id: received.threadId },
    markInboundRead: { ids: [received.id] },
    replyToMessage: { id: received.id, text: 'Thanks' },
    getSendPolicy: {},
    getApprovals: { status: 'all' },
    approveMessage: { id: held.approve },
    rejectMessage: { id: held.reject },
  }
}

describe('MCP over Streamable HTTP', () => {
  let env: TestEnv
  let server: ServerType
  let url: URL
  const clients: Client[] = []

  const connect = async (apiKey: string | null = env.apiKey) => {
    const client = new Client({ name: 'test', version: '1.0.0' })
    const headers: Record<string, string> = apiKey ? { 'X-API-KEY': apiKey } : {}
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }))
    clients.push(client)
    return client
  }

  // checkDomain's lookups go to a DNS server of .test names only.
  let dns: Awaited<ReturnType<typeof startDnsmasq>>
  beforeAll(async () => {
    dns = await startDnsmasq([])
  })
  afterAll(() => dns?.stop())

  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_DNS_SERVERS: dns.server })
    server = serve({ fetch: env.app.fetch, hostname: '127.0.0.1', port: 0 })
    await new Promise((r) => server.once('listening', r))
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`)
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
    await env.app.close()
    await new Promise((r) => server.close(r))
    await env.close()
  })

  it('initializes with tools only and a fixed list', async () => {
    const client = await connect()
    expect(client.getServerCapabilities()).toEqual({ tools: { listChanged: false } })
    expect(client.getServerVersion()?.name).toBe('mailroom')
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    for (const t of tools) {
      expect(t.title, t.name).toBeTruthy()
      expect(t.description!.length, t.name).toBeGreaterThan(80)
      // destructiveHint and idempotentHint mean something only for a tool that writes (MCP ToolAnnotations).
      const hints = t.annotations!.readOnlyHint
        ? ['openWorldHint', 'readOnlyHint']
        : ['destructiveHint', 'idempotentHint', 'openWorldHint', 'readOnlyHint']
      expect(Object.keys(t.annotations!).sort(), t.name).toEqual(hints)
      expect(byName(t.name).annotations, t.name).toMatchObject(t.annotations!)
      expect(t.inputSchema.type).toBe('object')
      expect(t.outputSchema?.type).toBe('object')
      expect(t.description!.includes('[DESTRUCTIVE]'), t.name).toBe(
        ['delistBlock', 'deleteRule', 'deleteWebhook', 'cancelMailOrder', 'revokeApiKey', 'rejectMessage'].includes(
          t.name,
        ),
      )
    }
  })

  it('calls every tool once; each structuredContent matches its output schema', async () => {
    await env.services.store.blocks.addToList({
      accountId: env.accountId,
      source: 'internal',
      kind: 'sender',
      address: 'blocked@example.org',
      reason: 'test',
      now: env.clock(),
    })
    const rule = await env.services.store.rules.create({
      orderId: env.orderId,
      type: 'email',
      data: 'old@example.org',
      now: env.clock(),
    })
    await env.services.store.domains.addKey({
      domain: 'inside.test',
      accountId: env.accountId,
      selector: 'mr-a',
      algorithm: 'ed25519',
      ...generateDkimKey('ed25519'),
      now: env.clock(),
    })
    const client = await connect()
    const { tools } = await client.listTools()
    const ajv = new Ajv({ strict: false })
    const { text: sentBefore } = await run(
      byName('sendMail'),
      { to: 'a@example.com', from: 'me@example.org', subject: 's', body: 'b' },
      env.ctx,
    )
    // A received message in an inbox the calls below leave alone (deleteInbox takes the one addInbox makes).
    const { store } = env.services
    await store.inbound.setReceiving({
      accountId: env.accountId,
      domain: 'inside.test',
      receiving: true,
      catchAll: false,
      now: env.clock(),
    })
    await store.inbound.addInbox({ accountId: env.accountId, address: 'keep@inside.test', now: env.clock() })
    const [received] = await store.inbound.receive(
      inboundMessage(
        env.accountId,
        { recipients: ['keep@inside.test'], receivedAt: env.clock(), raw: await messageWithAttachment() },
        {},
      ),
    )
    // Two held messages, for approveMessage and rejectMessage.
    const held = {
      approve: (await holdMessage(env.services, env)).txid,
      reject: (await holdMessage(env.services, env)).txid,
    }
    const args = happyArgs(env, String(rule.id), sentBefore, 1, received, held)
    for (const t of tools) {
      const result = await client.callTool({ name: t.name, arguments: args[t.name] })
      expect(result.isError, `${t.name}: ${JSON.stringify(result.content)}`).toBeFalsy()
      const validate = ajv.compile(t.outputSchema!)
      expect(validate(result.structuredContent), `${t.name}: ${ajv.errorsText(validate.errors)}`).toBe(true)
      // And against the whole output schema, required fields and all, which the listed one leaves out.
      const tool = byName(t.name)
      const output = tool.resultKey
        ? (result.structuredContent as Record<string, unknown>)[tool.resultKey]
        : result.structuredContent
      const whole = ajv.compile(jsonSchemaOf(tool.output, 'output'))
      expect(whole(output), `${t.name}: ${ajv.errorsText(whole.errors)}`).toBe(true)
      expect(JSON.parse((result.content as { text: string }[])[0].text)).toEqual(result.structuredContent)
    }
    // The sends really went into the queue: the transaction id of sendMail is in the log.
    const sent = await client.callTool({ name: 'sendMail', arguments: args.sendMail })
    const txid = (sent.structuredContent as { text: string }).text
    const log = await client.callTool({ name: 'viewMailLog', arguments: { mailid: txid } })
    expect((log.structuredContent as { total: number; emails: { id: string }[] }).emails[0].id).toBe(txid)
  })

  it('answers errors as isError results with the REST {code, message}', async () => {
    const client = await connect()
    const bad = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'not an address', from: 'me@example.org', subject: 's', body: 'b' },
    })
    expect(bad.isError).toBe(true)
    expect(JSON.parse((bad.content as { text: string }[])[0].text)).toEqual({
      code: 400,
      message: expect.stringContaining('to:'),
    })
    const missing = await client.callTool({ name: 'getMailOrderById', arguments: { id: 999 } })
    expect(JSON.parse((missing.content as { text: string }[])[0].text)).toEqual({
      code: 404,
      message: expect.any(String),
    })
    const unknown = await client.callTool({ name: 'noSuchTool', arguments: {} })
    expect(unknown.isError).toBe(true)
  })

  it('answers a display name or a comma list given to sendMail with a 400 naming sendAdvMail, sending nothing', async () => {
    const client = await connect()
    for (const to of ['Kay <k@example.com>', 'a@x.example, b@y.example']) {
      const result = await client.callTool({
        name: 'sendMail',
        arguments: { to, from: 'me@example.org', subject: 's', body: 'b' },
      })
      expect(result.isError).toBe(true)
      expect(JSON.parse((result.content as { text: string }[])[0].text)).toEqual({
        code: 400,
        message: `to: "${to}" is not a bare address: sendMail takes bare addresses, several as an array; for display names or comma-separated lists use sendAdvMail (POST /mail/advsend)`,
      })
    }
    expectNothingQueued(env)
  })

  it('refuses a line break in an address field, and an address literal, with 400 results, sending nothing', async () => {
    const client = await connect()
    const send = { from: 'me@example.org', subject: 's', body: 'b' }
    const injected = await client.callTool({
      name: 'sendAdvMail',
      arguments: { ...send, to: 't23@sink.test\r\nBcc: evil@evil.test' },
    })
    expect(injected.isError).toBe(true)
    expect(JSON.parse((injected.content as { text: string }[])[0].text)).toEqual({
      code: 400,
      message: expect.stringMatching(/^to: an address or name holds a line break \(CR or LF\)/),
    })
    const literal = await client.callTool({ name: 'sendMail', arguments: { ...send, to: 'u@[127.0.0.1]' } })
    expect(literal.isError).toBe(true)
    expect(JSON.parse((literal.content as { text: string }[])[0].text)).toEqual({
      code: 400,
      message: 'to: "u@[127.0.0.1]" is an address literal; mail goes only to addresses at a domain name',
    })
    expectNothingQueued(env)
  })

  it('takes a message of 6 MB in a session (the transport alone would refuse a body over 4 MB)', async () => {
    const client = await connect()
    const content = Buffer.alloc(4.5 * 1024 * 1024, 'mailroom ').toString('base64')
    const result = await client.callTool({
      name: 'sendAdvMail',
      arguments: {
        from: { email: 'me@example.org' },
        to: 'bob@example.com',
        subject: 'big',
        body: 'attached',
        attachments: [{ filename: 'big.txt', data: content }],
      },
    })
    expect(result.isError).toBeFalsy()
    const { text } = result.structuredContent as { text: string }
    expect(
      (
        await env.services.store.mail.log({
          orderId: env.orderId,
          mailid: text,
          limit: 1,
          skip: 0,
          dir: 'desc',
          groupby: 'recipient',
        })
      ).rows[0].bodySize,
    ).toBeGreaterThan(6_000_000)
  })

  it('refuses an argument the tool does not have, naming it, instead of dropping it', async () => {
    const client = await connect()
    const { tools } = await client.listTools()
    expect(tools.every((t) => t.inputSchema.additionalProperties === false)).toBe(true)
    const bcc = await client.callTool({
      name: 'sendMail',
      arguments: { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b', bcc: 'audit@example.net' },
    })
    expect(bcc.isError).toBe(true)
    expect(JSON.parse((bcc.content as { text: string }[])[0].text)).toEqual({
      code: 400,
      message: expect.stringMatching(
        /^bcc: sendMail has no argument bcc; its arguments are to, from, subject, body, id, list, idempotencyKey$/,
      ),
    })
    const typo = await client.callTool({ name: 'viewMailLog', arguments: { mailId: '0190f3a2b4c5d6e7f8' } })
    expect(JSON.parse((typo.content as { text: string }[])[0].text).message).toMatch(
      /^mailId: viewMailLog has no argument mailId \(did you mean mailid\?\)/,
    )
    expectNothingQueued(env)
  })

  it('lists the tools in under 16 KB, with the same arguments and required arguments as their schemas', async () => {
    const client = await connect()
    const listed = await client.listTools()
    // The contract's tools in the 16 KB they always took; each extension in 1 KB more, or 2 KB
    // for getMessage and getVolume, whose output schemas (a timeline, buckets) take most of it.
    const contract = listed.tools.filter((t) => !EXTENSIONS.includes(t.name))
    expect(Buffer.byteLength(JSON.stringify({ tools: contract }))).toBeLessThan(16 * 1024)
    for (const t of listed.tools.filter((t) => EXTENSIONS.includes(t.name)))
      expect(Buffer.byteLength(JSON.stringify(t)), t.name).toBeLessThan(/Webhook/.test(t.name) ? 1024 : 2048)
    expect(listed.tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    for (const t of listed.tools) {
      const shape = byName(t.name).input.shape as Record<string, ZodType>
      // The sends also take an idempotency key, which REST takes as a header, not in the input.
      const key = byName(t.name).idempotencyKey ? ['idempotencyKey'] : []
      expect(Object.keys(t.inputSchema.properties ?? {}), t.name).toEqual([...Object.keys(shape), ...key])
      const required = Object.keys(shape).filter((k) => !shape[k].safeParse(undefined).success)
      expect(t.inputSchema.required ?? [], t.name).toEqual(required)
    }
  })

  // Every client reads the whole list at the start of a session, and most hand all of it to their
  // model with each request: as tools are added, the list must grow slower than the tools.
  it('lists the tools in under 1 KB each on average', async () => {
    const { tools } = await (await connect()).listTools()
    expect(Buffer.byteLength(JSON.stringify({ tools })) / tools.length).toBeLessThan(1024)
  })

  it('lists self-contained schemas: every $ref points into the schema that holds it', async () => {
    const client = await connect()
    const { tools } = await client.listTools()
    const refs = (node: unknown): string[] =>
      Array.isArray(node)
        ? node.flatMap(refs)
        : isObject(node)
          ? Object.entries(node).flatMap(([k, v]) => (k === '$ref' ? [v as string] : refs(v)))
          : []
    const resolve = (schema: unknown, ref: string) =>
      ref
        .slice(2)
        .split('/')
        .reduce<unknown>((node, key) => (isObject(node) ? node[key] : undefined), schema)
    const all = tools.flatMap((t) =>
      [t.inputSchema, t.outputSchema!].map((schema) => ({ name: t.name, schema, refs: refs(schema) })),
    )
    expect(all.flatMap((s) => s.refs).length).toBeGreaterThan(0)
    for (const { name, schema, refs: found } of all) {
      for (const ref of found) {
        expect(ref, name).toMatch(/^#\/\$defs\//)
        expect(resolve(schema, ref), `${name}: ${ref}`).toEqual(expect.any(Object))
      }
    }
  })

  // The listed schemas against the full ones zod writes, through the SDK's own validator (Ajv and
  // its formats), as a client that checks arguments before it sends them would.
  const SAME_VERDICT: [string, Record<string, unknown>, boolean][] = [
    [
      'sendAdvMail',
      {
        from: { email: 'me@example.org', name: 'Me' },
        to: 'Bob <bob@example.com>, joe@example.com',
        cc: [{ email: 'cc@example.net' }],
        subject: 's',
        body: 'b',
        attachments: [{ filename: 'a.txt', data: 'aGk=' }],
      },
      true,
    ],
    ['sendAdvMail', { from: 'me@example.org', to: [{ email: 'not an address' }], subject: 's', body: 'b' }, false],
    ['sendAdvMail', { from: 'me@example.org', to: [], subject: 's', body: 'b' }, false],
    ['sendAdvMail', { from: 'me@example.org', to: 'bob@example.com', body: 'b' }, false],
    [
      'sendAdvMail',
      { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'b', bc: 'x@example.com' },
      false,
    ],
    [
      'sendAdvMail',
      { from: 'me@example.org', to: 'bob@example.com', subject: 's', body: 'b', attachments: [{ filename: 'a.txt' }] },
      false,
    ],
    [
      'sendMail',
      { to: ['bob@example.com', 'joe@example.com'], from: 'me@example.org', subject: 's', body: 'b', id: 3 },
      true,
    ],
    ['sendMail', { to: 'bob@', from: 'me@example.org', subject: 's', body: 'b' }, false],
    ['sendMail', { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b', id: 0 }, false],
    [
      'viewMailLog',
      { mailid: '0190f3a2b4c5d6e7f8', delivered: 1, startDate: 'yesterday', endDate: 1700000000, limit: 5, dir: 'asc' },
      true,
    ],
    ['viewMailLog', { delivered: 2 }, false],
    ['viewMailLog', { dir: 'up' }, false],
    ['viewMailLog', { from: 'me at example.org' }, false],
    ['getStats', { time: '7d' }, true],
    ['getStats', { time: 'week' }, false],
    ['addRule', { type: 'domain', data: 'spam.example', user: 'mb1' }, true],
    ['addRule', { type: 'sender', data: 'spam.example' }, false],
    ['deleteRule', { ruleId: 1.5 }, false],
  ]
  it.each(SAME_VERDICT)(
    'lists a %s input schema that takes %j as the full schema and the tool do (%s)',
    async (name, args, valid) => {
      const client = await connect()
      const listed = (await client.listTools()).tools.find((t) => t.name === name)!
      const tool = byName(name)
      const full = { ...jsonSchemaOf(tool.input, 'input'), additionalProperties: false }
      const validator = new AjvJsonSchemaValidator()
      expect(validator.getValidator(listed.inputSchema)(args).valid).toBe(valid)
      expect(validator.getValidator(full)(args).valid).toBe(valid)
      // strict: callTool refuses an argument the tool does not have.
      expect(tool.input.strict().safeParse(args).success).toBe(valid)
    },
  )

  it(`keeps at most ${MCP_SESSIONS_PER_ACCOUNT} sessions per account, closing the least recently used`, async () => {
    const headers = {
      'X-API-KEY': env.apiKey,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    }
    const open = async () => {
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      })
      await res.body?.cancel()
      return res.headers.get('mcp-session-id')!
    }
    const list = (id: string) =>
      fetch(url, {
        method: 'POST',
        headers: { ...headers, 'Mcp-Session-Id': id, 'Mcp-Protocol-Version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      })
    const ids: string[] = []
    for (let i = 0; i < MCP_SESSIONS_PER_ACCOUNT; i++) {
      ids.push(await open())
      env.clock.advance(1)
    }
    // The first is used again: the second is now the least recently used (a use is recorded to the minute).
    env.clock.advance(MCP_SESSION_TOUCH_MS)
    expect((await list(ids[0])).status).toBe(200)
    env.clock.advance(1)
    ids.push(await open())
    expect((await list(ids[1])).status).toBe(404)
    for (const id of [ids[0], ids[2], ids[MCP_SESSIONS_PER_ACCOUNT]]) expect((await list(id)).status).toBe(200)
    // Another account's sessions are its own.
    const other = await env.newAccount()
    const otherSession = await (async () => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { ...headers, 'X-API-KEY': other.apiKey },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      })
      await res.body?.cancel()
      return res.headers.get('mcp-session-id')!
    })()
    expect(otherSession).toMatch(/^[0-9a-f-]{36}$/)
    expect((await list(ids[2])).status).toBe(200)
  })

  it.each(['2025-06-18', '2025-11-25', '2024-11-05'])(
    'answers a client that asks for protocol %s with that version',
    async (version) => {
      const headers = {
        'X-API-KEY': env.apiKey,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
      }
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      })
      expect(res.status).toBe(200)
      // The reply is one JSON-RPC message, as JSON or as the data of one server-sent event.
      const text = await res.text()
      const body = JSON.parse(
        res.headers.get('content-type')?.includes('text/event-stream') ? /^data: (.*)$/m.exec(text)![1] : text,
      )
      expect(body.result.protocolVersion).toBe(version)
    },
  )

  it('keeps a session in the store: no GET stream (405), DELETE ends it', async () => {
    const headers = {
      'X-API-KEY': env.apiKey,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    }
    const rpc = (body: unknown, sessionId?: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          ...headers,
          ...(sessionId ? { 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-06-18' } : {}),
        },
        body: JSON.stringify(body),
      })
    const init = await rpc({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    })
    expect(init.status).toBe(200)
    const sessionId = init.headers.get('mcp-session-id')!
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/)
    await init.body?.cancel()
    expect((await rpc({ jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId)).status).toBe(202)

    const get = await fetch(url, {
      headers: {
        'X-API-KEY': env.apiKey,
        'Mcp-Session-Id': sessionId,
        Accept: 'text/event-stream',
        'Mcp-Protocol-Version': '2025-06-18',
      },
    })
    // Nothing is ever sent unasked: no stream is opened, here or on any node, and the answer says why.
    expect(get.status).toBe(405)
    expect(get.headers.get('allow')).toBe('POST, DELETE')
    expect((await get.json()).error.message).toMatch(/sends nothing unasked, so it opens no stream/)
    expect(await env.services.store.mcpSessions.get(sessionId)).toEqual({
      accountId: env.accountId,
      usedAt: env.clock(),
    })

    // Another account's key cannot use this session.
    const other = await env.newAccount()
    const foreign = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'X-API-KEY': other.apiKey, 'Mcp-Session-Id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    })
    expect(foreign.status).toBe(404)

    const list = await rpc({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, sessionId)
    expect(list.status).toBe(200)
    expect(await list.text()).toContain('sendAdvMail')

    const del = await fetch(url, {
      method: 'DELETE',
      headers: { 'X-API-KEY': env.apiKey, 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-06-18' },
    })
    expect(del.status).toBe(200)
    expect((await rpc({ jsonrpc: '2.0', id: 4, method: 'tools/list' }, sessionId)).status).toBe(404)
    expect(await env.services.store.mcpSessions.get(sessionId)).toBeUndefined()
  })

  it("refuses in a session a second initialize (400), another method (405) and another account's DELETE (404), storing nothing", async () => {
    const client = await connect()
    const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!
    const sessions = () =>
      (env.services.store as SqliteStore).sqlite.prepare('SELECT id, account_id AS accountId FROM mcp_sessions').all()
    const before = sessions()
    expect(before).toEqual([{ id: sessionId, accountId: env.accountId }])
    const send = (method: string, body?: unknown, apiKey = env.apiKey) =>
      fetch(url, {
        method,
        headers: {
          'X-API-KEY': apiKey,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Mcp-Session-Id': sessionId,
          'Mcp-Protocol-Version': '2025-06-18',
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const again = await send('POST', {
      jsonrpc: '2.0',
      id: 9,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    })
    expect(again.status).toBe(400)
    expect(again.headers.get('mcp-session-id')).toBeNull()
    expect((await again.json()).error).toEqual({
      code: -32000,
      message: 'Invalid Request: the session is initialized already',
    })
    const put = await send('PUT', { jsonrpc: '2.0', id: 10, method: 'tools/list' })
    expect(put.status).toBe(405)
    expect(put.headers.get('allow')).toBe('POST, DELETE')
    expect((await put.json()).error).toEqual({ code: -32000, message: 'Method not allowed: POST or DELETE a session' })
    const other = await env.newAccount()
    const foreign = await send('DELETE', undefined, other.apiKey)
    expect(foreign.status).toBe(404)
    expect((await foreign.json()).error).toEqual({ code: -32001, message: 'Session not found' })
    expect(sessions()).toEqual(before)
    expect((await client.listTools()).tools.length).toBe(TOOLS.length)
  })

  it('ends a session idle for 30 minutes, and keeps one used within them', async () => {
    const client = await connect()
    const transport = client.transport as StreamableHTTPClientTransport
    const other = await connect()
    const sessionId = transport.sessionId!
    for (let i = 0; i < 3; i++) {
      env.clock.advance(MCP_SESSION_IDLE_MS / 2)
      expect((await other.listTools()).tools.length).toBeGreaterThan(0)
    }
    await expect(client.listTools()).rejects.toThrow(/Session not found/)
    expect(await env.services.store.mcpSessions.get(sessionId)).toBeDefined()
    // The hourly housekeeping of mailroom serve deletes it.
    expect(await env.services.store.mcpSessions.sweep(env.clock() - MCP_SESSION_IDLE_MS)).toBe(1)
    expect(await env.services.store.mcpSessions.get(sessionId)).toBeUndefined()
  })

  it('serves a client that only POSTs, without a session', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'X-API-KEY': env.apiKey,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'getMailOrders', arguments: {} },
      }),
    })
    expect(res.status).toBe(200)
    expect(res.headers.get('mcp-session-id')).toBeNull()
    const body = await res.json()
    expect(body.id).toBe(7)
    expect(body.result.structuredContent).toEqual({
      orders: [{ id: env.orderId, status: 'active', username: `mb${env.orderId}` }],
    })
  })

  it('answers many session-less calls, at once and one after another, each with its own result', async () => {
    const other = await env.newAccount()
    // Half of them carry `_meta`, which only the SDK's transport takes: both paths are loaded.
    const call = (id: number, apiKey: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          'X-API-KEY': apiKey,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'getMailOrders', arguments: {}, ...(id % 2 ? { _meta: {} } : {}) },
        }),
      }).then((r) => r.json())
    // The same JSON-RPC id from two accounts at the same time, in three waves: the servers of
    // finished calls serve the next ones, and no answer crosses to another caller.
    for (let wave = 0; wave < 3; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => call(i % 2, i % 4 < 2 ? env.apiKey : other.apiKey)),
      )
      answers.forEach((body, i) => {
        expect(body.id).toBe(i % 2)
        expect(body.result.structuredContent.orders.map((o: { id: number }) => o.id)).toEqual([
          i % 4 < 2 ? env.orderId : other.orderId,
        ])
      })
      await new Promise((r) => setTimeout(r, 20))
    }
    const single = [await call(1, env.apiKey), await call(1, other.apiKey), await call(2, env.apiKey)]
    expect(single.map((b) => b.result.structuredContent.orders[0].id)).toEqual([
      env.orderId,
      other.orderId,
      env.orderId,
    ])
  })

  it('answers a plain session-less tools/call directly, exactly as the SDK answers it', async () => {
    const post = async (body: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'X-API-KEY': env.apiKey,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify(body),
      })
      return {
        status: res.status,
        type: res.headers.get('content-type'),
        session: res.headers.get('mcp-session-id'),
        body: await res.json(),
      }
    }
    const calls: [string | number, string, unknown][] = [
      [1, 'getMailOrders', {}],
      ['a-string-id', 'getMailOrderById', { id: env.orderId }],
      [3, 'getRules', undefined],
      [4, 'viewMailLog', { limit: 'many' }],
      [5, 'sendMail', { to: 'not an address', from: 'me@example.org', subject: 's', body: 'b' }],
      [6, 'noSuchTool', {}],
      [7, 'getMailOrderById', { id: 999_999 }],
    ]
    for (const [id, name, args] of calls) {
      const params = args === undefined ? { name } : { name, arguments: args }
      // `_meta` is a field the direct path leaves to the SDK: the same call, answered by each.
      const direct = await post({ jsonrpc: '2.0', id, method: 'tools/call', params })
      const sdk = await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: {} } })
      expect(direct, `${name} ${JSON.stringify(args)}`).toEqual(sdk)
      expect(direct.status).toBe(200)
      expect(direct.session).toBeNull()
    }
    // The SDK's own refusals stay its own: none of these is answered as a tool call.
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'getMailOrders', arguments: {} } }
    const refused = await Promise.all([
      post({ ...call, id: 1.5 }),
      post({ ...call, extra: true }),
      post(call, { Accept: 'application/json' }),
      post(call, { 'Content-Type': 'text/plain' }),
      post(call, { 'Mcp-Protocol-Version': '1999-01-01' }),
    ])
    expect(refused.map((r) => r.status)).toEqual([400, 400, 406, 415, 400])
    for (const r of refused) expect(r.body).toMatchObject({ jsonrpc: '2.0', error: { code: expect.any(Number) } })
  })

  it('refuses a tool name that is not a string, or arguments that are not an object, as a 400 like any bad argument', async () => {
    const client = await connect()
    const post = async (body: unknown) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'X-API-KEY': env.apiKey,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(body),
      })
      return { status: res.status, body: await res.json() }
    }
    const send = { to: 'bob@example.com', from: 'me@example.org', subject: 's', body: 'b' }
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 42, arguments: send }, 'name: expected the name of a tool, a string'],
      [{ name: ['sendMail'], arguments: send }, 'name: expected the name of a tool, a string'],
      [{ arguments: send }, 'name: is required'],
      [{ name: 'sendMail', arguments: [send] }, 'arguments: expected an object of named arguments'],
      [{ name: 'sendMail', arguments: 'to=bob@example.com' }, 'arguments: expected an object of named arguments'],
      [{ name: 'sendMail', arguments: null }, 'arguments: expected an object of named arguments'],
    ]
    for (const [params, message] of cases) {
      const refusal = { isError: true, content: [{ type: 'text', text: JSON.stringify({ code: 400, message }) }] }
      // In a session, through the SDK's server; without one, answered directly and (with `_meta`) by the SDK's transport.
      expect(
        await client.request({ method: 'tools/call', params } as never, CallToolResultSchema),
        JSON.stringify(params),
      ).toEqual(refusal)
      expect(await post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params })).toEqual({
        status: 200,
        body: { jsonrpc: '2.0', id: 1, result: refusal },
      })
      expect(await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { ...params, _meta: {} } })).toEqual({
        status: 200,
        body: { jsonrpc: '2.0', id: 2, result: refusal },
      })
    }
    expectNothingQueued(env)
    // Other methods without a handler are still unknown.
    expect(await post({ jsonrpc: '2.0', id: 3, method: 'resources/list', params: {} })).toMatchObject({
      status: 200,
      body: { id: 3, error: { code: -32601 } },
    })
  })

  it('gives every answer X-Request-Id and the CORS headers: REST, MCP, errors, preflight', async () => {
    const base = url.toString().replace(/\/mcp$/, '')
    const mcpHeaders = {
      'X-API-KEY': env.apiKey,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    }
    const answers = await Promise.all([
      fetch(`${base}/ping`),
      fetch(`${base}/mail`, { headers: { 'X-API-KEY': env.apiKey } }),
      fetch(`${base}/mail`),
      fetch(`${base}/no/such/path`),
      fetch(url, {
        method: 'POST',
        headers: mcpHeaders,
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      }),
      fetch(url, { method: 'POST', headers: mcpHeaders, body: 'not json' }),
      fetch(url, {
        method: 'OPTIONS',
        headers: { Origin: 'http://localhost:3000', 'Access-Control-Request-Method': 'POST' },
      }),
    ])
    expect(answers.map((r) => r.status)).toEqual([200, 200, 401, 404, 200, 400, 204])
    const ids = answers.map((r) => r.headers.get('x-request-id'))
    for (const [i, r] of answers.entries()) {
      expect(ids[i], `answer ${i}`).toMatch(/^[0-9a-f-]{36}$/)
      expect(r.headers.get('access-control-allow-origin'), `answer ${i}`).toBe('*')
      await r.arrayBuffer()
    }
    expect(new Set(ids).size).toBe(ids.length)
    expect(answers[4].headers.get('access-control-expose-headers')).toContain('Mcp-Session-Id')
    // A usable id from the client is kept; anything else is replaced.
    const kept = await fetch(`${base}/ping`, { headers: { 'X-Request-Id': 'trace-42=a' } })
    expect(kept.headers.get('x-request-id')).toBe('trace-42=a')
    const replaced = await fetch(`${base}/ping`, { headers: { 'X-Request-Id': 'bad id;' } })
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  })

  it('refuses a missing or wrong key with 401 before reading JSON-RPC', async () => {
    for (const key of [undefined, 'mr_wrong']) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { ...(key ? { 'X-API-KEY': key } : {}), 'Content-Type': 'application/json' },
        body: 'not json at all',
      })
      expect(res.status).toBe(401)
      expect(await res.json()).toEqual({ code: 401, message: expect.stringContaining('X-API-KEY') })
    }
    await expect(connect(null)).rejects.toThrow()
  })

  it('answers CORS preflight and refuses foreign Origins on loopback', async () => {
    const pre = await fetch(url, {
      method: 'OPTIONS',
      headers: {
        Origin: 'http://localhost:3000',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'x-api-key,mcp-session-id',
      },
    })
    expect(pre.status).toBe(204)
    expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-api-key')
    // fetch() will not send a forged Host, so these go through node:http as a browser's would arrive.
    const post = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          url,
          {
            method: 'POST',
            headers: {
              'X-API-KEY': env.apiKey,
              'Content-Type': 'application/json',
              Accept: 'application/json, text/event-stream',
              ...headers,
            },
          },
          (res) => {
            res.resume()
            resolve(res.statusCode!)
          },
        )
        req.on('error', reject)
        req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))
      })
    expect(await post({ Origin: 'http://evil.example' })).toBe(403)
    expect(await post({ Host: `attacker.example:${url.port}` })).toBe(403)
    expect(await post({ Origin: `http://localhost:${url.port}` })).toBe(200)
  })
})
