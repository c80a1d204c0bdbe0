import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { SendPolicy } from '../../storage/store.js'
import { approveMessage } from '../../tools/approve-message.js'
import { createApiKey } from '../../tools/create-api-key.js'
import type { ToolContext } from '../../tools/define.js'
import { getApiKeys } from '../../tools/get-api-keys.js'
import { getApprovals } from '../../tools/get-approvals.js'
import { getSendPolicy } from '../../tools/get-send-policy.js'
import { rejectMessage } from '../../tools/reject-message.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { holdMessage } from './held.js'
import { expectRefused, expectSchemaRefusal, run, storedCounts } from './support.js'

const ALWAYS: SendPolicy = {
  approval: 'always',
  approveAbove: null,
  maxPerHour: 20,
  maxPerDay: null,
  allowedRecipients: [],
}
const NOW_ISO = '2026-11-22T12:00:00.000Z'
/** A refusal's message as written (expectRefused reads a string as a pattern). */
const literal = (text: string) => new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))

describe('the approval tools', () => {
  let env: TestEnv
  /** The account's person: its first key, without a send policy. */
  let person: ToolContext
  beforeEach(async () => {
    env = await createTestEnv()
    person = { ...env.ctx, holder: { kind: 'key', id: 1 }, policy: null }
  })
  afterEach(() => env.close())

  const hold = (options: Parameters<typeof holdMessage>[2] = {}) => holdMessage(env.services, env, options)
  const stored = (txid: string) => env.services.store.holds.get(txid)
  /** What a decision may change: the hold, and the rows the queue would take. */
  const state = async (txid: string) => ({
    hold: (await stored(txid))?.status,
    due: await env.services.store.queue.pending(),
    counts: storedCounts(env),
  })

  it('getApprovals lists the held messages; approving one queues it, and a second decision is a 409', async () => {
    const held = await hold({ to: ['bob@example.com', 'carol@example.net'] })
    expect(await run(getApprovals, {}, person)).toEqual({
      total: 1,
      skip: 0,
      limit: 20,
      approvals: [
        {
          id: held.txid,
          status: 'held',
          from: 'agent@example.org',
          to: ['bob@example.com', 'carol@example.net'],
          subject: 'For your approval',
          reason: 'every send of API key 1 waits for approval',
          holder: 'API key 1',
          createdAt: NOW_ISO,
          expiresAt: '2026-11-23T12:00:00.000Z',
          decidedAt: null,
          decidedBy: null,
          approvalUrl: `${env.config.publicUrl}/console/approvals?id=${held.txid}`,
        },
      ],
    })
    expect(await env.services.store.queue.pending()).toBe(0)

    env.clock.advance(60_000)
    expect(await run(approveMessage, { id: held.txid.toUpperCase() }, person)).toEqual({
      status: 'ok',
      text: `${held.txid} approved: queued for delivery`,
    })
    expect(await stored(held.txid)).toMatchObject({
      status: 'approved',
      decidedBy: 'API key 1 (console or API)',
      decidedAt: env.clock(),
    })
    expect(await env.services.store.queue.pending()).toBe(2)
    expect((await run(getApprovals, {}, person)).approvals).toEqual([])
    expect((await run(getApprovals, { status: 'approved' }, person)).approvals).toMatchObject([
      { id: held.txid, status: 'approved', decidedAt: '2026-11-22T12:01:00.000Z' },
    ])

    const before = await state(held.txid)
    for (const tool of [approveMessage, rejectMessage]) {
      const verb = tool === approveMessage ? 'approved' : 'rejected'
      await expectRefused(
        run(tool, { id: held.txid }, person),
        409,
        literal(
          `id: message ${held.txid} was not ${verb}: it was approved at 2026-11-22T12:01:00.000Z by API key 1 (console or API)`,
        ),
      )
    }
    expect(await state(held.txid)).toEqual(before)
  })

  it('rejecting one means it is never sent; approving it then is a 409 saying so', async () => {
    const held = await hold()
    expect(await run(rejectMessage, { id: held.txid }, person)).toEqual({
      status: 'ok',
      text: `${held.txid} rejected: it will never be sent`,
    })
    expect(await stored(held.txid)).toMatchObject({ status: 'rejected', decidedBy: 'API key 1 (console or API)' })
    const before = await state(held.txid)
    expect(before).toMatchObject({ hold: 'rejected', due: 0, counts: { bodies: 0 } })
    await expectRefused(
      run(approveMessage, { id: held.txid }, person),
      409,
      literal(`id: message ${held.txid} was not approved: it was rejected at ${NOW_ISO} by API key 1 (console or API)`),
    )
    expect(await state(held.txid)).toEqual(before)
  })

  it('an access token, a key under a send policy and a sandbox key (of real mail) may not decide: 403, nothing changes', async () => {
    const held = await hold()
    const before = await state(held.txid)
    const token = { ...env.ctx, holder: { kind: 'grant', id: 1 }, policy: null, scopes: ['mail:read', 'mail:manage'] }
    const agent = { ...env.ctx, holder: { kind: 'key', id: 1 }, policy: ALWAYS } satisfies ToolContext
    const sandbox = { ...person, sandbox: true }
    for (const tool of [approveMessage, rejectMessage]) {
      const verb = tool === approveMessage ? 'approved' : 'rejected'
      await expectRefused(
        run(tool, { id: held.txid }, token as ToolContext),
        403,
        `id: not ${verb}: a held message is decided by a person, with an API key in the console or the operator's mailroom approvals, not with an access token`,
      )
      await expectRefused(
        run(tool, { id: held.txid }, agent),
        403,
        `id: not ${verb}: this API key is under a send policy, and may not decide held messages`,
      )
      await expectRefused(
        run(tool, { id: held.txid }, sandbox),
        403,
        `id: not ${verb}: a sandbox key may decide sandbox mail only, and ${held.txid} is real mail`,
      )
    }
    expect(await state(held.txid)).toEqual(before)
    expect(before.hold).toBe('held')

    // A sandbox key decides sandbox mail.
    const play = await hold({ sandbox: true })
    expect(await run(approveMessage, { id: play.txid }, sandbox)).toMatchObject({ status: 'ok' })
  })

  it("another account's held message, or one never held, is not found; nothing changes", async () => {
    const other = await env.newAccount()
    const theirs = await holdMessage(env.services, other)
    const before = await state(theirs.txid)
    for (const tool of [approveMessage, rejectMessage]) {
      await expectRefused(run(tool, { id: theirs.txid }, person), 404, `id: no held message ${theirs.txid}`)
      await expectRefused(
        run(tool, { id: '0190f3a2b4c5d6e7f8' }, person),
        404,
        'id: no held message 0190f3a2b4c5d6e7f8',
      )
    }
    expect(await state(theirs.txid)).toEqual(before)
    expect((await run(getApprovals, {}, person)).approvals).toEqual([])
    expectSchemaRefusal(approveMessage, { id: 'approvals' }, 'id')
    expectSchemaRefusal(getApprovals, { status: 'maybe' }, 'status')
    expectSchemaRefusal(getApprovals, { limit: 101 }, 'limit')
  })

  it('past MAILROOM_APPROVAL_TTL a held message is rejected by expiry: approving it is a 409 saying it expired', async () => {
    const held = await hold()
    env.clock.advance(env.config.approval.ttl)
    await expectRefused(
      run(approveMessage, { id: held.txid }, person),
      409,
      literal(
        `id: message ${held.txid} was not approved: it expired at 2026-11-23T12:00:00.000Z and was rejected (MAILROOM_APPROVAL_TTL)`,
      ),
    )
    expect(await stored(held.txid)).toMatchObject({ status: 'rejected', decidedBy: 'expiry (MAILROOM_APPROVAL_TTL)' })
    expect(await env.services.store.queue.pending()).toBe(0)
    // The sweep finds nothing left to reject.
    expect(await env.services.store.holds.expire(env.clock())).toBe(0)
  })

  it('getSendPolicy shows the caller policy and what its limits counted; getApiKeys each key policy', async () => {
    expect(await run(getSendPolicy, {}, env.ctx)).toEqual({
      holder: 'none',
      policy: { approval: 'none', approveAbove: null, maxPerHour: null, maxPerDay: null, allowedRecipients: [] },
      used: { hour: 0, day: 0 },
    })
    const { store } = env.services
    expect(await store.policies.set({ kind: 'key', id: 1 }, ALWAYS)).toBe(true)
    expect(await store.sendCounts.take({ holder: 'key:1', now: env.clock(), maxPerHour: 20, maxPerDay: null })).toEqual(
      {
        ok: true,
      },
    )
    const agent = { ...env.ctx, holder: { kind: 'key', id: 1 }, policy: ALWAYS } satisfies ToolContext
    expect(await run(getSendPolicy, {}, agent)).toEqual({
      holder: 'API key 1',
      policy: ALWAYS,
      used: { hour: 1, day: 1 },
    })
    expect(await run(getApiKeys, {}, env.ctx)).toMatchObject([{ id: 1, policy: ALWAYS }])

    // A key under a policy may not make a key without one.
    const keys = (await store.apiKeys.list(env.accountId)).length
    await expectRefused(run(createApiKey, {}, agent), 403, 'not created: this API key is under a send policy')
    expect(await store.apiKeys.list(env.accountId)).toHaveLength(keys)
  })

  it('over REST: the key policy reaches the tools, and its refusals are the same', async () => {
    const held = await hold()
    const approve = () => call(env, 'POST', `/mail/approvals/${held.txid}/approve`)
    await env.services.store.policies.set({ kind: 'key', id: 1 }, ALWAYS)
    const refused = await approve()
    expect(refused.status).toBe(403)
    expect((await refused.json()).message).toMatch(/this API key is under a send policy/)
    expect((await call(env, 'POST', '/keys', {})).status).toBe(403)
    expect((await (await call(env, 'GET', '/policy')).json()).holder).toBe('API key 1')
    expect((await stored(held.txid))?.status).toBe('held')

    await env.services.store.policies.set({ kind: 'key', id: 1 }, null)
    const done = await approve()
    expect(done.status).toBe(200)
    expect(await done.json()).toEqual({ status: 'ok', text: `${held.txid} approved: queued for delivery` })
    expect((await call(env, 'POST', `/mail/approvals/${held.txid}/reject`)).status).toBe(409)
    const listed = await (await call(env, 'GET', '/mail/approvals?status=all')).json()
    expect(listed.approvals).toMatchObject([{ id: held.txid, status: 'approved' }])
  })
})
