import { readFileSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { TOOLS } from '../../tools/index.js'
import { ALWAYS_SERVED, TOOLSETS } from '../../transports/toolsets.js'
import { createServedTestEnv, mcpPost, type TestEnv } from '../helpers.js'
import { expectNothingQueued } from '../tools/support.js'
import { BASE, overHttp, tokensFor } from './oauth-flow.js'

const send = { to: 'bob@example.com', from: 'me@example.org', subject: 'hi', body: 'hello' }
const SETS =
  'the toolsets are send, log, stats, orders, rules, blocks, keys, domains, webhooks, inbox, approvals, or name tools (sendMail, …)'
/** The registry's names, in its order, of those given. */
const inOrder = (names: string[]) => TOOLS.map((t) => t.name).filter((n) => names.includes(n))

describe('toolsets', () => {
  it('put every tool of the registry in one toolset, pingServer in all', () => {
    const listed = [...Object.values(TOOLSETS).flat(), ...ALWAYS_SERVED]
    expect([...listed].sort()).toEqual(TOOLS.map((t) => t.name).sort())
    expect(new Set(listed).size).toBe(listed.length)
  })

  it('are documented in docs/api.md as they are', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const rows = [...doc.matchAll(/^\| `(\w+)` \| (\w+(?:, \w+)*) \|$/gm)].map((m) => [m[1], m[2].split(', ')])
    expect(Object.fromEntries(rows)).toEqual(TOOLSETS)
  })
})

describe('MCP over HTTP with ?tools=', () => {
  let env: TestEnv & { base: string }
  const clients: Client[] = []
  beforeEach(async () => {
    env = await createServedTestEnv({ MAILROOM_PUBLIC_URL: BASE })
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {})
    await env.close()
  })

  const connect = async (query: string) => {
    const client = new Client({ name: 'agent', version: '1' })
    const url = new URL(`${env.base}/mcp${query}`)
    await client.connect(
      new StreamableHTTPClientTransport(url, { requestInit: { headers: { 'X-API-KEY': env.apiKey } } }),
    )
    clients.push(client)
    return client
  }
  const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name)
  const errorOf = (result: Awaited<ReturnType<Client['callTool']>>) => {
    expect(result.isError).toBe(true)
    return JSON.parse((result.content as { text: string }[])[0].text)
  }

  it('lists and calls only the tools of the toolsets asked for, in a session; another is an unknown tool', async () => {
    const client = await connect('?tools=send,log')
    expect(client.transport).toBeInstanceOf(StreamableHTTPClientTransport)
    expect((client.transport as StreamableHTTPClientTransport).sessionId).toBeTruthy()
    expect(await names(client)).toEqual(inOrder(['pingServer', ...TOOLSETS.send, ...TOOLSETS.log]))
    const refused = await client.callTool({ name: 'addRule', arguments: { type: 'domain', data: 'spam.example' } })
    expect(errorOf(refused)).toEqual({
      code: 400,
      message:
        'name: no tool named addRule in the tools this connection asked for (send,log); it is in the rules ' +
        'toolset: connect with it in tools, or without tools for every tool',
    })
    expect(await env.services.store.rules.list([env.orderId])).toEqual([])
    const sent = await client.callTool({ name: 'sendMail', arguments: send })
    expect(sent.isError).toBeUndefined()
    const log = await client.callTool({
      name: 'viewMailLog',
      arguments: { mailid: (sent.structuredContent as { text: string }).text },
    })
    expect((log.structuredContent as { total: number }).total).toBe(1)
  })

  it('takes tool names beside toolsets, in any case; an empty list is every tool', async () => {
    expect(await names(await connect('?tools=Rules,getstats'))).toEqual(
      inOrder(['pingServer', 'getRules', 'addRule', 'deleteRule', 'getStats']),
    )
    expect(await names(await connect('?tools='))).toEqual(TOOLS.map((t) => t.name))
  })

  it('refuses a name that is neither a toolset nor a tool with a 400 listing the toolsets, running nothing', async () => {
    const res = await mcpPost(
      `${env.base}/mcp?tools=send,mail`,
      { 'X-API-KEY': env.apiKey },
      {
        method: 'tools/call',
        params: { name: 'sendMail', arguments: send },
      },
    )
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ code: 400, message: `tools: no toolset or tool named mail; ${SETS}` })
    expectNothingQueued(env)
    await expect(connect('?tools=everything')).rejects.toThrow(/no toolset or tool named everything/)
  })

  it('serves an access token the tools of both its scopes and the toolset; outside the toolset is unknown, not 403', async () => {
    const http = overHttp(env.base)
    const { access_token } = await tokensFor(http, env.apiKey, { scope: 'mail:read' })
    const rpc = (message: object) =>
      mcpPost(`${env.base}/mcp?tools=send,log`, { Authorization: `Bearer ${access_token}` }, message)
    const listed = await (await rpc({ method: 'tools/list' })).json()
    expect(listed.result.tools.map((t: { name: string }) => t.name)).toEqual(inOrder(['pingServer', ...TOOLSETS.log]))
    expect((await rpc({ method: 'tools/call', params: { name: 'sendMail', arguments: send } })).status).toBe(403)
    const outside = await rpc({
      method: 'tools/call',
      params: { name: 'addRule', arguments: { type: 'domain', data: 'x.example' } },
    })
    expect(outside.status).toBe(200)
    expect(JSON.parse((await outside.json()).result.content[0].text)).toMatchObject({
      code: 400,
      message: expect.stringMatching(/^name: no tool named addRule in the tools this connection asked for/),
    })
    expect(await env.services.store.rules.list([env.orderId])).toEqual([])
    expectNothingQueued(env)
  })
})
