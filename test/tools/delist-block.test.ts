import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { BlockRule } from '../../storage/store.js'
import { delistBlock } from '../../tools/delist-block.js'
import { getMailBlocks } from '../../tools/get-mail-blocks.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, expectSchemaRefusal, run, sql } from './support.js'

const HOUR = 3_600_000

describe('delistBlock', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const event = (rule: BlockRule, envFrom: string, accountId = env.accountId) =>
    env.services.store.blocks.addEvent(accountId, {
      rule,
      createdAt: env.clock() - HOUR,
      envFrom,
      messageId: null,
      subject: 'smtp offer',
      rcptTo: 'rcpt@example.com',
    })
  const list = (
    source: 'external' | 'internal',
    kind: 'sender' | 'recipient',
    address: string,
    accountId = env.accountId,
  ) => env.services.store.blocks.addToList({ accountId, source, kind, address, reason: 'test', now: env.clock() })
  /** What is left for an address in the three stores of an account. */
  const remaining = (address: string, accountId = env.accountId) => ({
    events: (
      sql(env)
        .prepare('SELECT COUNT(*) AS n FROM block_events WHERE account_id = ? AND lower(env_from) = lower(?)')
        .get(accountId, address) as { n: number }
    ).n,
    list: (
      sql(env)
        .prepare(
          'SELECT source, kind FROM block_list WHERE account_id = ? AND address = lower(?) ORDER BY source, kind',
        )
        .all(accountId, address) as { source: string; kind: string }[]
    ).map((r) => `${r.source}/${r.kind}`),
  })
  const delist = (email: string, ctx = env.ctx) => run(delistBlock, { email }, ctx)

  it.each<[string, () => Promise<void>]>([
    [
      'spam-filter events (as sender)',
      () =>
        Promise.all([event('MBTRAP', 'spammer@example.org'), event('LOCAL_BL_RCPT', 'spammer@example.org')]).then(
          () => undefined,
        ),
    ],
    ['the external block list', () => list('external', 'sender', 'spammer@example.org')],
    ['the internal block list as a sender', () => list('internal', 'sender', 'spammer@example.org')],
    ['the internal block list as a suppressed recipient', () => list('internal', 'recipient', 'spammer@example.org')],
  ])('removes an address that is only in %s', async (_label, seed) => {
    await seed()
    expect(await delist('spammer@example.org')).toEqual({ status: 'ok', text: 'record deleted' })
    expect(remaining('spammer@example.org')).toEqual({ events: 0, list: [] })
  })

  it('delists any address the relay can have blocked, = and & included', async () => {
    await event('MBTRAP', 'info+tag=1&x@example.org')
    expect(await delist('info+tag=1&x@example.org')).toEqual({ status: 'ok', text: 'record deleted' })
    expect(remaining('info+tag=1&x@example.org')).toEqual({ events: 0, list: [] })
  })

  it('removes the address from all stores at once, and getMailBlocks no longer shows it', async () => {
    await event('MBTRAP', 'spammer@example.org')
    for (let i = 0; i < 5; i++) await event('SUBJECT', 'spammer@example.org')
    await list('external', 'sender', 'spammer@example.org')
    await list('internal', 'sender', 'spammer@example.org')
    await list('internal', 'recipient', 'spammer@example.org')
    await event('MBTRAP', 'innocent@example.org')
    await list('internal', 'sender', 'innocent@example.org')
    expect((await run(getMailBlocks, {}, env.ctx)).subject).toHaveLength(1)

    expect(await delist('spammer@example.org')).toEqual({ status: 'ok', text: 'record deleted' })

    expect(remaining('spammer@example.org')).toEqual({ events: 0, list: [] })
    expect(remaining('innocent@example.org')).toEqual({ events: 1, list: ['internal/sender'] })
    const shown = await run(getMailBlocks, {}, env.ctx)
    expect(shown.mbtrap.map((e) => e.from)).toEqual(['innocent@example.org'])
    expect(shown.subject).toEqual([])
  })

  it('matches the address in any case', async () => {
    await event('MBTRAP', 'Spammer@Example.org')
    await list('internal', 'sender', 'SPAMMER@example.org')
    expect(await delist('spammer@EXAMPLE.ORG')).toMatchObject({ status: 'ok' })
    expect(remaining('spammer@example.org')).toEqual({ events: 0, list: [] })
  })

  it('answers 404 when the address is on no list, and a second delisting is a 404 too', async () => {
    await expectRefused(delist('clean@example.org'), 404, /^email: clean@example\.org is not on any block list/)
    await list('internal', 'sender', 'once@example.org')
    await delist('once@example.org')
    await expectRefused(delist('once@example.org'), 404, /^email: /)
  })

  it("neither sees nor touches another account's blocks (404)", async () => {
    const other = await env.newAccount()
    await event('MBTRAP', 'theirs@example.org', other.accountId)
    await list('external', 'sender', 'theirs@example.org', other.accountId)
    await expectRefused(delist('theirs@example.org'), 404, /^email: /)
    expect(remaining('theirs@example.org', other.accountId)).toEqual({ events: 1, list: ['external/sender'] })
  })

  it("delists only for the caller's account when both accounts block the address", async () => {
    const other = await env.newAccount()
    await list('internal', 'sender', 'shared@example.org')
    await list('internal', 'sender', 'shared@example.org', other.accountId)
    await delist('shared@example.org')
    expect(remaining('shared@example.org')).toEqual({ events: 0, list: [] })
    expect(remaining('shared@example.org', other.accountId)).toEqual({ events: 0, list: ['internal/sender'] })
  })

  it.each([['not-an-address'], ['spammer@'], ['']])('refuses the email %j in the schema', (email) => {
    expectSchemaRefusal(delistBlock, { email }, 'email')
  })

  it('refuses a missing email in the schema', () => {
    expectSchemaRefusal(delistBlock, {}, 'email')
  })

  it('refuses a caller without an account (401)', async () => {
    await expectRefused(delist('x@example.org', { ...env.ctx, accountId: null }), 401, 'API key')
  })
})
