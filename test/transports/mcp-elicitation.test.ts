import { Client, type ClientOptions } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  type ElicitRequest,
  ElicitRequestSchema,
  type ElicitResult,
  ElicitationCompleteNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { rmSync } from 'node:fs'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import type { RunningServer } from '../../serve.js'
import type { SqliteStore } from '../../storage/sqlite/index.js'
import { openDataDir } from '../../storage/sqlite/index.js'
import { DEFAULT_POLICY, type Hold } from '../../storage/store.js'
import { TOOLS } from '../../tools/index.js'
import { createServedTestEnv, mcpClient, mcpPost, startTestServer, type TestEnv } from '../helpers.js'
import { startSink } from '../relay/sink.js'

// A send held for approval asks the person at an MCP client that declared elicitation, on the
// tool call's own stream; their answer, POSTed to /mcp, decides the message through the store.

type Asked = ElicitRequest['params']
type Answer = (asked: Asked) => ElicitResult | Promise<ElicitResult>

/** The SDK's client with these capabilities, answering each question with `answer`; `asked` records them. */
async function askedClient(base: string, apiKey: string, capabilities: ClientOptions['capabilities'], answer: Answer) {
  const client = new Client({ name: 'agent', version: '1' }, { capabilities })
  const asked: Asked[] = []
  const completed: string[] = []
  // The SDK lets only a client that declared elicitation answer it.
  if (capabilities?.elicitation)
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params)
      return answer(request.params)
    })
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (n) => {
    completed.push(n.params.elicitationId)
  })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { 'X-API-KEY': apiKey } } }),
  )
  return { client, asked, completed }
}

const FORM = { elicitation: { form: {} } }
const textOf = (result: { content?: unknown }) => JSON.parse((result.content as { text: string }[])[0].text)

describe('MCP elicitation: `mailroom serve` with a key whose policy holds every send', () => {
  let sink: Awaited<ReturnType<typeof startSink>>
  let server: RunningServer
  let dataDir: string
  let apiKey: string
  let base: string
  let publicUrl: string
  let store: SqliteStore
  const clients: Client[] = []

  beforeAll(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-elicit-', { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    ;({ server, dataDir, apiKey } = started)
    base = `http://127.0.0.1:${server.httpPort}`
    publicUrl = started.config.publicUrl
    // The operator's side of the same database: the key's policy, and what became of each hold.
    store = openDataDir(dataDir)
    const owner = await store.apiKeys.owner(apiKey)
    await store.policies.set({ kind: 'key', id: owner!.keyId! }, { ...DEFAULT_POLICY, approval: 'always' })
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
  })
  afterAll(async () => {
    await store.close()
    await server.stop()
    await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const connect = async (capabilities: ClientOptions['capabilities'], answer: Answer) => {
    const asker = await askedClient(base, apiKey, capabilities, answer)
    clients.push(asker.client)
    return asker
  }
  const send = (client: Client, subject: string) =>
    client.callTool({
      name: 'sendMail',
      arguments: {
        from: 'me@example.org',
        to: 'bob@example.com',
        subject,
        body: `first line\nsecond line of ${subject}`,
      },
    })
  const sunk = (subject: string) => sink.messages.filter((m) => m.raw.toString().includes(`Subject: ${subject}`))

  it('accept with approve: the call answers ok and the message is delivered', async () => {
    const { client, asked } = await connect(FORM, () => ({ action: 'accept', content: { decision: 'approve' } }))
    const result = await send(client, 'approved in the chat')
    expect(result.isError).toBeFalsy()
    const { status, text: txid } = result.structuredContent as { status: string; text: string }
    expect(status).toBe('ok')
    expect(asked).toHaveLength(1)
    expect(asked[0]).toMatchObject({ mode: 'form', requestedSchema: { required: ['decision'] } })
    expect(asked[0].message).toContain('Subject: approved in the chat')
    expect(asked[0].message).toContain('second line of approved in the chat')
    expect(asked[0].message).toContain(`${publicUrl}/console/approvals?id=${txid}`)
    expect(await store.holds.get(txid)).toMatchObject({
      status: 'approved',
      decidedBy: 'the person at the MCP client',
    })
    await expect.poll(() => sunk('approved in the chat').length, { timeout: 15_000, interval: 100 }).toBe(1)
  })

  it('decline: a 403 tool error, the message rejected, nothing delivered', async () => {
    const { client, asked } = await connect(FORM, () => ({ action: 'decline' }))
    const result = await send(client, 'declined in the chat')
    expect(result.isError).toBe(true)
    const error = textOf(result)
    expect(error).toMatchObject({ code: 403, message: expect.stringMatching(/declined message \S+; it was rejected/) })
    expect(asked).toHaveLength(1)
    const txid = /declined message (\S+);/.exec(error.message)![1]
    expect((await store.holds.get(txid))?.status).toBe('rejected')
    const log = await fetch(`${base}/mail/log?subject=${encodeURIComponent('declined in the chat')}`, {
      headers: { 'X-API-KEY': apiKey },
    })
    expect(JSON.stringify(await log.json())).toMatch(/rejected/)
    // Accept with the form's `reject` is a decline too.
    const other = await connect(FORM, () => ({ action: 'accept', content: { decision: 'reject' } }))
    expect((await send(other.client, 'rejected in the form')).isError).toBe(true)
    expect(sunk('declined in the chat')).toEqual([])
    expect(sunk('rejected in the form')).toEqual([])
  })

  it('cancel: the message stays held, with its approval link', async () => {
    const { client, asked } = await connect(FORM, () => ({ action: 'cancel' }))
    const result = await send(client, 'dismissed in the chat')
    expect(result.isError).toBeFalsy()
    const held = result.structuredContent as { status: string; text: string; approvalUrl: string }
    expect(held).toMatchObject({ status: 'held', approvalUrl: `${publicUrl}/console/approvals?id=${held.text}` })
    expect(asked).toHaveLength(1)
    expect(await store.holds.get(held.text)).toMatchObject({ status: 'held', elicitationState: 'cancelled' })
  })

  it('a client without elicitation is not asked: held', async () => {
    const client = await mcpClient(base, apiKey)
    clients.push(client)
    const result = await send(client, 'no elicitation')
    expect(result.structuredContent).toMatchObject({ status: 'held' })
    const { text: txid } = result.structuredContent as { text: string }
    expect(await store.holds.get(txid)).toMatchObject({ status: 'held', elicitationId: null })
  })

  it('URL mode: the question is the approval page; deciding there ends the call', async () => {
    const { client, asked, completed } = await connect({ elicitation: { url: {} } }, async (q) => {
      // The person opens the page and approves there (the console's decision, in the store).
      const txid = new URL((q as { url: string }).url).searchParams.get('id')!
      await store.holds.decide({ txid, decision: 'approve', by: 'API key 1 (console or API)', now: Date.now() })
      return { action: 'accept' }
    })
    const result = await send(client, 'approved on the page')
    expect(result.structuredContent).toMatchObject({ status: 'ok' })
    const { text: txid } = result.structuredContent as { text: string }
    expect(asked).toEqual([expect.objectContaining({ mode: 'url', url: `${publicUrl}/console/approvals?id=${txid}` })])
    await expect.poll(() => completed).toEqual([(asked[0] as { elicitationId: string }).elicitationId])
    expect((await store.holds.get(txid))?.decidedBy).toBe('API key 1 (console or API)')
    await expect.poll(() => sunk('approved on the page').length, { timeout: 15_000, interval: 100 }).toBe(1)
  })

  it('an answer to a question nobody asked is a 404 and changes nothing', async () => {
    const client = await mcpClient(base, apiKey)
    clients.push(client)
    const held = (await send(client, 'still held')).structuredContent as { text: string }
    for (const id of ['mr-el-x', 'mr-el-f-forged', 'mr-el-u-forged']) {
      const res = await mcpPost(`${base}/mcp`, { 'X-API-KEY': apiKey }, { id, result: { action: 'decline' } })
      expect(res.status).toBe(404)
      expect(await res.json()).toMatchObject({
        error: { code: -32001, message: `no elicitation ${id}: it was answered, expired, or is another account's` },
      })
    }
    expect((await store.holds.get(held.text))?.status).toBe('held')
  })
})

/**
 * The question and the intake alone, before a send holds anything: the store's holds are a fake
 * of one held message, and sendMail's handler only asks about it.
 */
describe('askVia and the answer intake, over a fake hold', () => {
  let env: TestEnv & { base: string }
  let hold: Hold
  const heldNow = (): Hold => ({
    txid: 'tx-fake-1',
    accountId: env.accountId,
    orderId: env.orderId,
    status: 'held',
    holder: 'key:1',
    holderLabel: 'API key 1',
    reason: 'every send needs approval',
    expiresAt: Date.UTC(2026, 10, 23),
    approvalUrl: 'http://localhost:8080/console/approvals?id=tx-fake-1',
    createdAt: 0,
    decidedAt: null,
    decidedBy: null,
    elicitationId: null,
    elicitationState: null,
    envFrom: 'me@example.org',
    recipients: ['bob@example.com'],
    subject: 'fake',
    messageId: null,
    sandbox: false,
  })

  beforeAll(async () => {
    env = await createServedTestEnv()
    const { store } = env.services
    const modes = new Map<string, { form: boolean; url: boolean } | null>()
    // Sessions with their modes, whatever the store keeps of them.
    const open = store.mcpSessions.open.bind(store.mcpSessions)
    const get = store.mcpSessions.get.bind(store.mcpSessions)
    vi.spyOn(store.mcpSessions, 'open').mockImplementation(async (input) => {
      modes.set(input.id, input.elicitation ?? null)
      return open(input)
    })
    vi.spyOn(store.mcpSessions, 'get').mockImplementation(async (id) => {
      const session = await get(id)
      return session && { ...session, elicitation: modes.get(id) ?? null }
    })
    vi.spyOn(store.holds, 'get').mockImplementation(async (txid) => (txid === hold.txid ? { ...hold } : undefined))
    vi.spyOn(store.holds, 'asking').mockImplementation(async ({ txid, elicitationId }) => {
      if (txid !== hold.txid || hold.status !== 'held') return false
      Object.assign(hold, { elicitationId, elicitationState: 'asked' })
      return true
    })
    vi.spyOn(store.holds, 'answer').mockImplementation(async ({ elicitationId, accountId, action, by }) => {
      if (hold.elicitationId !== elicitationId || hold.accountId !== accountId || hold.status !== 'held') return
      if (action === 'cancel') Object.assign(hold, { elicitationState: 'cancelled' })
      else Object.assign(hold, { status: action === 'accept' ? 'approved' : 'rejected', decidedBy: by })
      return { ...hold }
    })
    const sendMail = TOOLS.find((t) => t.name === 'sendMail')!
    vi.spyOn(sendMail, 'handler').mockImplementation(async (_input, ctx) => ({
      status: ctx.ask
        ? await ctx.ask({
            txid: hold.txid,
            from: hold.envFrom,
            to: hold.recipients,
            subject: hold.subject,
            preview: 'hello\nthere',
            reason: hold.reason,
            approvalUrl: hold.approvalUrl,
            expiresAt: hold.expiresAt,
          })
        : 'not asked',
      text: hold.txid,
    }))
  })
  afterAll(async () => {
    vi.restoreAllMocks()
    await env.close()
  })

  const ask = async (capabilities: ClientOptions['capabilities'], answer: Answer) => {
    hold = heldNow()
    const asker = await askedClient(env.base, env.apiKey, capabilities, answer)
    const result = await asker.client.callTool({
      name: 'sendMail',
      arguments: { from: 'me@example.org', to: 'bob@example.com', subject: 'fake', body: 'hello' },
    })
    await asker.client.close()
    return { ...asker, status: (result.structuredContent as { status: string }).status }
  }

  it('form: accept approves, decline and a form reject reject, cancel leaves it held', async () => {
    const accepted = await ask(FORM, () => ({ action: 'accept', content: { decision: 'approve' } }))
    expect(accepted.status).toBe('approved')
    expect(hold).toMatchObject({ status: 'approved', decidedBy: 'the person at the MCP client' })
    expect(accepted.asked[0]).toMatchObject({ mode: 'form' })
    expect(accepted.asked[0].message).toMatch(
      /^An agent wants to send this message.*\nFrom: me@example.org\nTo \(1\): bob@example.com\nSubject: fake\n\nhello\nthere\n/,
    )
    expect((await ask(FORM, () => ({ action: 'decline' }))).status).toBe('rejected')
    expect((await ask(FORM, () => ({ action: 'accept', content: { decision: 'reject' } }))).status).toBe('rejected')
    expect((await ask(FORM, () => ({ action: 'cancel' }))).status).toBe('held')
    expect(hold).toMatchObject({ status: 'held', elicitationState: 'cancelled' })
  })

  it('`elicitation: {}` is form mode; no capability, no question', async () => {
    expect(
      (await ask({ elicitation: {} }, () => ({ action: 'accept', content: { decision: 'approve' } }))).status,
    ).toBe('approved')
    const unasked = await ask({}, () => ({ action: 'accept' }))
    expect(unasked).toMatchObject({ status: 'not asked', asked: [] })
  })

  it('URL mode: accept only opens the page; a decline there ends the wait, held', async () => {
    const declined = await ask({ elicitation: { url: {} } }, () => ({ action: 'decline' }))
    expect(declined.asked[0]).toMatchObject({ mode: 'url', url: hold.approvalUrl })
    expect(declined.status).toBe('held')
    expect(hold).toMatchObject({ status: 'held', elicitationState: 'cancelled' })
    const opened = await ask({ elicitation: { url: {} } }, () => {
      // The page decides (another request, in the store); the client's accept changes nothing itself.
      Object.assign(hold, { status: 'approved', decidedBy: 'API key 1 (console or API)' })
      return { action: 'accept' }
    })
    expect(opened.status).toBe('approved')
    await expect.poll(() => opened.completed).toEqual([hold.elicitationId])
  })

  it('an unknown id is a 404; a known one is taken with 202', async () => {
    hold = heldNow()
    const answer = (apiKey: string, id: string, action: string) =>
      mcpPost(`${env.base}/mcp`, { 'X-API-KEY': apiKey }, { id, result: { action } })
    expect((await answer(env.apiKey, 'mr-el-f-nobody', 'accept')).status).toBe(404)
    Object.assign(hold, { elicitationId: 'mr-el-f-known', elicitationState: 'asked' })
    expect((await answer(env.apiKey, 'mr-el-f-known', 'cancel')).status).toBe(202)
    expect(hold.elicitationState).toBe('cancelled')
    // Another account's key finds nothing of this account's.
    const other = await env.newAccount()
    Object.assign(hold, { elicitationState: 'asked' })
    expect((await answer(other.apiKey, 'mr-el-f-known', 'accept')).status).toBe(404)
    expect(hold.status).toBe('held')
  })
})
