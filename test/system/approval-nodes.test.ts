import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startSink } from '../relay/sink.js'
import { describePostgres } from '../storage/postgres.js'
import { BIN, waitFor } from './peers.js'
import { type Node, roundRobin, startTwoNodes } from './nodes.js'

// Approval with two `mailroom serve` processes over one PostgreSQL database, behind a round-robin
// balancer: the person's answer may reach the node that did not ask, a decision is taken once,
// a node killed right after approving loses nothing and sends nothing twice, and the rate limits
// are counted for both nodes together.

await describePostgres('system: approval on two nodes of one PostgreSQL database', () => {
  const cleanup: (() => unknown)[] = []
  let sink: Awaited<ReturnType<typeof startSink>>
  let a: Node
  let b: Node
  /** The first key: no send policy, so it may decide holds. */
  let apiKey: string
  let env: Record<string, string>
  /** Messages the sink received while a test said that one may not arrive yet. */
  const early: string[] = []
  let guarded: string | undefined

  const rest = (node: Node, key: string, path: string, body?: unknown) =>
    fetch(`http://127.0.0.1:${node.httpPort}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'X-API-KEY': key, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  const send = (node: Node, key: string, subject: string, to = 'bob@example.com') =>
    rest(node, key, '/mail/send', { from: 'me@example.org', to, subject, body: `the text of ${subject}` })
  const subjectsAtSink = () =>
    sink.messages.map((m) => /^Subject: (.*)$/m.exec(m.raw.toString('latin1'))?.[1]?.trim() ?? '')
  /** Once `subject` reached the sink: how many times it arrived. */
  const deliveredTimes = async (subject: string) => {
    await waitFor(async () => subjectsAtSink().includes(subject), 30_000)
    return subjectsAtSink().filter((s) => s === subject).length
  }
  /** The subjects of the tests that expect one delivery each. */
  const once: string[] = []
  /**
   * A new key of the account (made through a node) with the send policy these `mailroom` options
   * give, once both nodes hold it to `expected`.
   */
  const keyWithPolicy = async (options: string[], expected: Record<string, unknown>) => {
    const made = (await (await rest(a, apiKey, '/keys', {})).json()) as { id: number; key: string }
    const out = spawnSync(process.execPath, [BIN, 'account', 'key', 'policy', String(made.id), ...options], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    })
    expect(out.status, out.stderr).toBe(0)
    // A policy change reaches every node's settings within a second.
    for (const node of [a, b])
      await waitFor(async () => {
        const { policy } = (await (await rest(node, made.key, '/policy')).json()) as { policy: Record<string, unknown> }
        return Object.entries(expected).every(([k, v]) => policy[k] === v)
      })
    return made.key
  }

  beforeAll(async () => {
    sink = await startSink()
    cleanup.push(sink.close)
    // The message a test says may not arrive yet is noted if it arrives, and fails that test.
    sink.state.dataRule = (raw) => {
      // Only that test's message: mail of the tests before may still be on its way.
      if (guarded && raw.toString('latin1').includes(`Subject: ${guarded}\r\n`)) early.push(guarded)
      return undefined
    }
    let banner: string
    ;({ a, b, env, banner } = await startTwoNodes(sink.port, cleanup))
    apiKey = /API key \(shown only now\): (\S+)/.exec(banner)![1]
  }, 60_000)
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  it('delivers once a message whose person approved it through the node that did not ask', async () => {
    const key = await keyWithPolicy(['--approval', 'always'], { approval: 'always' })
    const proxy = await roundRobin([a, b])
    cleanup.push(proxy.close)
    const client = new Client({ name: 'asked', version: '1' }, { capabilities: { elicitation: { form: {} } } })
    const asked: string[] = []
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params.message)
      return { action: 'accept', content: { decision: 'approve' } }
    })
    cleanup.push(() => client.close())
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url, { requestInit: { headers: { 'X-API-KEY': key } } }),
    )
    // Once initialized, the client asks for the server's stream (a GET, 405) without waiting for it.
    await waitFor(async () => proxy.served[2]?.status)
    const subject = 'approved in the chat, answered on the other node'
    const result = await client.callTool({
      name: 'sendMail',
      arguments: { from: 'me@example.org', to: 'carol@example.com', subject, body: 'hello' },
    })
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy()
    expect(result.structuredContent).toMatchObject({ status: 'ok' })
    expect(asked).toHaveLength(1)
    const call = proxy.served.find((s) => s.rpc === 'tools/call')!
    const answer = proxy.served.find((s) => s.method === 'POST' && s.rpc === '')!
    expect(answer).toMatchObject({ status: 202 })
    expect(answer.node).not.toBe(call.node)
    expect(await deliveredTimes(subject)).toBe(1)
    once.push(subject)
  }, 60_000)

  it('counts maxPerHour for both nodes together: the next send is a 429 on either', async () => {
    const key = await keyWithPolicy(['--max-per-hour', '4'], { maxPerHour: 4 })
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await send(i % 2 ? b : a, key, `counted ${i}`)).status)
    expect(statuses).toEqual([200, 200, 200, 200])
    for (const node of [a, b]) {
      const refused = await send(node, key, `one too many on ${node.name}`)
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(await refused.json()).toMatchObject({
        code: 429,
        message: expect.stringMatching(/^maxPerHour 4 reached for API key \d+: the next send is possible at /),
      })
    }
  })

  it('delivers exactly once, by the other node, a message approved through a node killed at once', async () => {
    const key = await keyWithPolicy(['--approval', 'always'], { approval: 'always' })
    const subject = 'approved, then its node killed'
    guarded = subject
    const held = await send(a, key, subject, 'dave@example.com')
    expect(held.status).toBe(200)
    const { status, text: txid } = (await held.json()) as { status: string; text: string }
    expect(status).toBe('held')
    // Both workers poll their queue every second: a held message they could take would go now.
    await new Promise((r) => setTimeout(r, 2500))
    guarded = undefined
    const approved = await rest(a, apiKey, `/mail/approvals/${txid}/approve`, {})
    a.child.kill('SIGKILL')
    expect(approved.status).toBe(200)
    expect(await deliveredTimes(subject)).toBe(1)
    once.push(subject)
    // Nothing more arrives, of this message or the first test's: a second delivery would have
    // come by now (leases are 5 s).
    await new Promise((r) => setTimeout(r, 6000))
    for (const s of once) expect(subjectsAtSink().filter((at) => at === s).length, s).toBe(1)
    expect(early).toEqual([])
    const log = await rest(b, apiKey, `/mail/log?mailid=${txid}`)
    expect((await log.json()) as { emails: unknown[] }).toMatchObject({ emails: [{ delivered: 1 }] })
  }, 60_000)
})
