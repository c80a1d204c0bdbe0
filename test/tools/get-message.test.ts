import { describe, expect, it } from 'vitest'
import { SANDBOX_DOMAIN } from '../../relay/sandbox.js'
import { getMailOrderById } from '../../tools/get-mail-order-by-id.js'
import { getMessage, NO_ATTEMPT } from '../../tools/get-message.js'
import { sendMail } from '../../tools/send-mail.js'
import { viewMailLog } from '../../tools/view-mail-log.js'
import { call, mcpClient } from '../helpers.js'
import { type DeliveringEnv, FIRST_RETRY_MS, MX, testEnvs } from './envs.js'
import { expectRefused, expectSchemaRefusal, run, storedCounts } from './support.js'

const iso = (ms: number) => new Date(ms).toISOString()
/** What a timeline entry that is not an attempt holds. */
/** What an attempt over TLS to the test MX (its self-signed certificate, no MTA-STS record) says of its TLS. */
const NO_POLICY_TLS = { tls: true, tlsPolicy: 'none', tlsPolicyDomain: 'example.com', certValid: false }

describe('getMessage', () => {
  const envs = testEnvs()
  const send = async (d: Pick<DeliveringEnv, 'ctx'>, to: string | string[]) =>
    (await run(sendMail, { from: 'me@example.org', to, subject: 'story', body: 'hello' }, d.ctx)).text
  /** Waits until the message's recipients meet `check`, then answers the tool's view of it. */
  const until = async (d: DeliveringEnv, txid: string, check: (m: Awaited<ReturnType<typeof story>>) => boolean) => {
    await expect.poll(async () => check(await story(d.ctx, txid)), { timeout: 15_000, interval: 50 }).toBe(true)
    return story(d.ctx, txid)
  }
  const story = (ctx: DeliveringEnv['ctx'], id: string) => run(getMessage, { id }, ctx)

  it('tells a queued message: envelope, headers, size, door, and each recipient accepted', async () => {
    const env = await envs.plain()
    const at = env.clock()
    const txid = await send(env, ['bob@example.com', 'carol@example.net'])
    const [row] = (await run(viewMailLog, { mailid: txid, groupby: 'message' }, env.ctx)).emails
    const result = await story(env.ctx, txid.toUpperCase())
    expect(result).toEqual({
      id: txid,
      orderId: env.orderId,
      user: `mb${env.orderId}`,
      from: 'me@example.org',
      headerFrom: 'me@example.org',
      replyTo: 'me@example.org',
      subject: 'story',
      messageId: row.messageId,
      size: row.bodySize,
      origin: '192.0.2.10',
      interface: 'api',
      transtype: 'HTTP',
      createdAt: iso(at),
      recipients: ['bob@example.com', 'carol@example.net'].map((recipient) => ({
        recipient,
        status: 'queued',
        suppressed: false,
        nextAttemptAt: iso(at),
        attempts: 0,
        timeline: [{ time: iso(at), event: 'accepted', ...NO_ATTEMPT }],
      })),
    })
    expect(getMessage.output.parse(result)).toEqual(result)
  })

  it('tells a recipient deferred once then delivered, through the real delivery worker: both attempts in order', async () => {
    const d = await envs.delivering({ tls: true })
    let asked = 0
    d.sink.state.rcptRule = () =>
      asked++ === 0 ? { code: 451, message: '4.7.1 Greylisted, try again later' } : undefined
    const accepted = d.env.clock()
    const txid = await send(d, 'later@example.com')
    const first = await until(d, txid, (m) => m.recipients[0].attempts === 1)
    expect(first.recipients[0]).toMatchObject({
      status: 'deferred',
      nextAttemptAt: iso(accepted + FIRST_RETRY_MS),
    })
    d.later(FIRST_RETRY_MS)
    const done = await until(d, txid, (m) => m.recipients[0].status === 'delivered')
    expect(done.recipients).toEqual([
      {
        recipient: 'later@example.com',
        status: 'delivered',
        suppressed: false,
        nextAttemptAt: null,
        attempts: 2,
        timeline: [
          { time: iso(accepted), event: 'accepted', ...NO_ATTEMPT },
          {
            time: iso(accepted),
            event: 'deferred',
            mxHostname: MX.name,
            mxAddress: MX.address,
            ...NO_POLICY_TLS,
            code: 451,
            response: '451 4.7.1 Greylisted, try again later',
            nextAttemptAt: iso(accepted + FIRST_RETRY_MS),
          },
          {
            time: iso(accepted + FIRST_RETRY_MS),
            event: 'delivered',
            mxHostname: MX.name,
            mxAddress: MX.address,
            ...NO_POLICY_TLS,
            code: 250,
            response: expect.stringMatching(/^250 2\.0\.0 Ok: queued as SINK1/),
            nextAttemptAt: null,
          },
        ],
      },
    ])
    expect(d.sink.messages.map((m) => [m.to, m.secure])).toEqual([[['later@example.com'], true]])
  })

  it('tells a bounce that put the recipient on the suppression list, and not once it is delisted', async () => {
    const d = await envs.delivering()
    d.sink.state.rcptRule = (rcpt) =>
      rcpt.startsWith('gone') ? { code: 550, message: '5.1.1 <gone@example.com>: user unknown' } : undefined
    const txid = await send(d, ['gone@example.com', 'here@example.com'])
    const m = await until(d, txid, (m) => m.recipients.every((r) => r.attempts === 1))
    const [gone, here] = m.recipients
    expect(gone).toMatchObject({ status: 'failed', suppressed: true, attempts: 1 })
    expect(gone.timeline.map((e) => [e.event, e.code, e.tls])).toEqual([
      ['accepted', null, null],
      ['failed', 550, false],
      ['suppressed', null, null],
    ])
    expect(gone.timeline[2]).toMatchObject({
      time: gone.timeline[1].time,
      response: expect.stringContaining("gone@example.com was put on this account's suppression list"),
    })
    expect(here).toMatchObject({ status: 'delivered', suppressed: false })
    await d.env.services.store.blocks.delist(d.env.accountId, 'gone@example.com')
    const after = await story(d.ctx, txid)
    expect(after.recipients[0].suppressed).toBe(false)
    expect(after.recipients[0].timeline.map((e) => e.event)).toEqual(['accepted', 'failed', 'suppressed'])
  })

  it("tells sandbox mail's rehearsed outcomes as attempts without an MX", async () => {
    const d = await envs.delivering()
    const ctx = { ...d.ctx, sandbox: true }
    const txid = (
      await run(
        sendMail,
        { from: 'me@example.org', to: `defer@${SANDBOX_DOMAIN}`, subject: 'rehearsal', body: 'x' },
        ctx,
      )
    ).text
    await until(d, txid, (m) => m.recipients[0].attempts === 1)
    d.later(FIRST_RETRY_MS)
    const m = await until(d, txid, (m) => m.recipients[0].status === 'delivered')
    expect(m.sandbox).toBe(true)
    expect(m.recipients[0].timeline.map((e) => [e.event, e.code, e.mxHostname, e.mxAddress, e.tls])).toEqual([
      ['accepted', null, null, null, null],
      ['deferred', 451, null, null, null],
      ['delivered', 250, null, null, null],
    ])
    expect(d.sink.messages).toEqual([])
  })

  it("ends a canceled recipient's timeline with a failure that says so", async () => {
    const d = await envs.delivering()
    d.sink.state.rcptRule = () => ({ code: 451, message: '4.3.0 busy' })
    const txid = await send(d, 'busy@example.com')
    await until(d, txid, (m) => m.recipients[0].attempts === 1)
    const at = d.env.clock()
    await d.env.services.store.queue.cancel({ txid, now: at, leaseMs: 60_000, response: 'canceled by the operator' })
    const m = await story(d.ctx, txid)
    expect(m.recipients[0]).toMatchObject({ status: 'failed', attempts: 1, nextAttemptAt: null })
    expect(m.recipients[0].timeline.at(-1)).toEqual({
      time: iso(at),
      event: 'failed',
      ...NO_ATTEMPT,
      response: 'canceled by the operator',
    })
  })

  it("answers another account's message, and an unknown one, with 404 as other tools do, and stores nothing", async () => {
    const env = await envs.plain()
    const other = await env.newAccount()
    const theirs = await send({ ctx: other.ctx }, 'bob@example.com')
    const before = storedCounts(env)
    const foreign = await expectRefused(story(env.ctx, theirs), 404, /^id: /)
    expect(foreign.message).toBe(`id: message ${theirs} not found`)
    const missing = await expectRefused(story(env.ctx, '0'.repeat(18)), 404, /^id: /)
    expect(missing.message).toBe(`id: message ${'0'.repeat(18)} not found`)
    // Worded as getMailOrderById words its own.
    const order = await expectRefused(run(getMailOrderById, { id: 999_999 }, env.ctx), 404, /^id: /)
    expect(order.message.replace('mail order 999999', `message ${theirs}`)).toBe(foreign.message)
    expect(storedCounts(env)).toEqual(before)
    // Its own account sees it.
    expect((await story(other.ctx, theirs)).id).toBe(theirs)
  })

  it.each([
    ['too short', 'abc'],
    ['not hex', 'z'.repeat(18)],
    ['too long', 'a'.repeat(20)],
  ])('refuses an id %s in the schema', (_label, id) => {
    expectSchemaRefusal(getMessage, { id }, 'id')
  })

  describe('over REST and MCP', () => {
    it('is GET /mail/log/{id}, beside the contract’s /mail/log and /mail/{id}', async () => {
      const env = await envs.plain()
      const txid = await send(env, 'bob@example.com')
      const res = await call(env, 'GET', `/mail/log/${txid}`)
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual(await story(env.ctx, txid))
      const other = await env.newAccount()
      const foreign = await call(env, 'GET', `/mail/log/${txid}`, undefined, { apiKey: other.apiKey })
      expect([foreign.status, await foreign.json()]).toEqual([
        404,
        { code: 404, message: `id: message ${txid} not found` },
      ])
      const bad = await call(env, 'GET', '/mail/log/not-an-id')
      expect([bad.status, ((await bad.json()) as { message: string }).message]).toEqual([
        400,
        expect.stringMatching(/^id: must be a transaction id/),
      ])
      expect((await call(env, 'GET', `/mail/log/${txid}`, undefined, { apiKey: null })).status).toBe(401)
      // The contract's routes are unchanged.
      expect((await call(env, 'GET', '/mail/log')).status).toBe(200)
      expect((await call(env, 'GET', `/mail/${env.orderId}`)).status).toBe(200)
    })

    it('is the getMessage tool over MCP Streamable HTTP', async () => {
      const { env, base } = await envs.served()
      const txid = await send(env, 'bob@example.com')
      const client = await mcpClient(base, env.apiKey)
      envs.keep(client)
      const result = await client.callTool({ name: 'getMessage', arguments: { id: txid } })
      expect(result.isError).toBeFalsy()
      expect(result.structuredContent).toEqual(await story(env.ctx, txid))
      const other = await env.newAccount()
      const theirs = await mcpClient(base, other.apiKey)
      envs.keep(theirs)
      const refused = await theirs.callTool({ name: 'getMessage', arguments: { id: txid } })
      expect(refused.isError).toBe(true)
      expect(JSON.parse((refused.content as { text: string }[])[0].text)).toEqual({
        code: 404,
        message: `id: message ${txid} not found`,
      })
    })
  })
})
