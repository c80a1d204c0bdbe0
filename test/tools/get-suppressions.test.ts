import { describe, expect, it } from 'vitest'
import { getMessage } from '../../tools/get-message.js'
import { getSuppressions } from '../../tools/get-suppressions.js'
import { sendMail } from '../../tools/send-mail.js'
import type { ToolContext } from '../../tools/define.js'
import { call, mcpClient, type TestEnv } from '../helpers.js'
import { testEnvs } from './envs.js'
import { expectRefused, run, storedCounts } from './support.js'

const iso = (ms: number) => new Date(ms).toISOString()

describe('getSuppressions', () => {
  const envs = testEnvs()
  const list = (ctx: ToolContext, input: Record<string, unknown> = {}) => run(getSuppressions, input, ctx)
  const send = async (ctx: ToolContext, to: string | string[]) =>
    (await run(sendMail, { from: 'me@example.org', to, subject: 'hello', body: 'hi' }, ctx)).text
  /** Suppresses `address` as `mailroom suppress add` does: no message caused it. */
  const suppress = (env: TestEnv, address: string, accountId = env.accountId) =>
    env.services.store.blocks.addToList({
      accountId,
      source: 'internal',
      kind: 'recipient',
      address,
      reason: 'suppressed by the operator',
      now: env.clock(),
    })

  it('shows a recipient right after a hard bounce from the destination, with the message that caused it', async () => {
    const d = await envs.delivering()
    d.sink.state.rcptRule = (rcpt) =>
      rcpt.startsWith('gone')
        ? { code: 550, message: `5.1.1 <${rcpt}>: Recipient address rejected: User unknown` }
        : undefined
    expect(await list(d.ctx)).toEqual({ total: 0, skip: 0, limit: 100, suppressions: [] })
    const at = d.env.clock()
    const txid = await send(d.ctx, ['gone@example.com', 'here@example.com'])
    // Right after the bounce: once the message's story has the failure, the list has the address.
    await expect
      .poll(async () => (await run(getMessage, { id: txid }, d.ctx)).recipients[0].status, { timeout: 15_000 })
      .toBe('failed')
    const result = await list(d.ctx)
    expect(result).toEqual({
      total: 1,
      skip: 0,
      limit: 100,
      suppressions: [
        {
          address: 'gone@example.com',
          reason:
            'an earlier message to it bounced: 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown',
          since: iso(at),
          mailid: txid,
        },
      ],
    })
    expect(getSuppressions.output.parse(result)).toEqual(result)
    // The delivered recipient is not on it; the bounce is the message it names.
    expect(d.sink.messages.map((m) => m.to)).toEqual([['here@example.com']])
    expect((await run(getMessage, { id: result.suppressions[0].mailid! }, d.ctx)).recipients[0]).toMatchObject({
      recipient: 'gone@example.com',
      suppressed: true,
    })
  })

  it("lists the operator's suppressions without a message, newest first, a page at a time", async () => {
    const env = await envs.plain()
    const start = env.clock()
    for (const address of ['a@example.com', 'b@example.com', 'c@example.com']) {
      await suppress(env, address)
      env.clock.advance(1000)
    }
    const all = await list(env.ctx)
    expect(all.suppressions.map((s) => [s.address, s.since, s.mailid, s.reason])).toEqual([
      ['c@example.com', iso(start + 2000), null, 'suppressed by the operator'],
      ['b@example.com', iso(start + 1000), null, 'suppressed by the operator'],
      ['a@example.com', iso(start), null, 'suppressed by the operator'],
    ])
    expect(await list(env.ctx, { skip: 1, limit: 1 })).toEqual({
      total: 3,
      skip: 1,
      limit: 1,
      suppressions: [all.suppressions[1]],
    })
    expect(await list(env.ctx, { skip: 3 })).toMatchObject({ total: 3, suppressions: [] })
  })

  it("never shows another account's suppressions, over REST either", async () => {
    const env = await envs.plain()
    const other = await env.newAccount()
    await suppress(env, 'mine@example.com')
    await suppress(env, 'theirs@example.com', other.accountId)
    expect((await list(env.ctx)).suppressions.map((s) => s.address)).toEqual(['mine@example.com'])
    expect((await list(other.ctx)).suppressions.map((s) => s.address)).toEqual(['theirs@example.com'])
    const res = await call(env, 'GET', '/mail/suppressions', undefined, { apiKey: other.apiKey })
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ total: 1, suppressions: [{ address: 'theirs@example.com' }] })
  })

  it('is GET /mail/suppressions: a sandbox key reads it too, a delisted address leaves it and can be sent to', async () => {
    const env = await envs.plain()
    await suppress(env, 'gone@example.com')
    const res = await call(env, 'GET', '/mail/suppressions?limit=10')
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body).toEqual({ ...(await list(env.ctx, { limit: 10 })), limit: 10 })
    const sandbox = await env.services.store.apiKeys.create(env.accountId, env.clock(), { sandbox: true })
    const asSandbox = await call(env, 'GET', '/mail/suppressions?limit=10', undefined, { apiKey: sandbox.key })
    expect([asSandbox.status, await asSandbox.json()]).toEqual([200, body])
    expect((await call(env, 'GET', '/mail/suppressions', undefined, { apiKey: null })).status).toBe(401)
    // Mail to it is refused, until delistBlock (the Blocks page's button) lifts it.
    await expectRefused(send(env.ctx, 'gone@example.com'), 400, /local block list/)
    const delisted = await call(env, 'POST', '/mail/blocks/delete', { email: 'gone@example.com' })
    expect(await delisted.json()).toEqual({ status: 'ok', text: 'record deleted' })
    expect(await (await call(env, 'GET', '/mail/suppressions')).json()).toMatchObject({ total: 0, suppressions: [] })
    expect(await send(env.ctx, 'gone@example.com')).toMatch(/^[0-9a-f]{18,19}$/)
  })

  it.each([
    ['limit=0', /^limit: /],
    ['limit=1001', /^limit: /],
    ['skip=-1', /^skip: /],
    ['skip=x', /^skip: /],
  ])('refuses %s with a 400 that names it, and changes nothing', async (query, message) => {
    const env = await envs.plain()
    await suppress(env, 'gone@example.com')
    const before = storedCounts(env)
    const res = await call(env, 'GET', `/mail/suppressions?${query}`)
    expect([res.status, await res.json()]).toEqual([400, { code: 400, message: expect.stringMatching(message) }])
    expect(storedCounts(env)).toEqual(before)
    expect((await list(env.ctx)).total).toBe(1)
  })

  it('is the getSuppressions tool over MCP Streamable HTTP', async () => {
    const { env, base } = await envs.served()
    await suppress(env, 'gone@example.com')
    const client = envs.keep(await mcpClient(base, env.apiKey))
    const result = await client.callTool({ name: 'getSuppressions', arguments: { limit: 5 } })
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent).toEqual(await list(env.ctx, { limit: 5 }))
    const other = await env.newAccount()
    const theirs = envs.keep(await mcpClient(base, other.apiKey))
    expect((await theirs.callTool({ name: 'getSuppressions', arguments: {} })).structuredContent).toEqual({
      total: 0,
      skip: 0,
      limit: 100,
      suppressions: [],
    })
  })
})
