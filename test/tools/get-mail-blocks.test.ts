import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { BlockEvent, BlockRule } from '../../storage/store.js'
import { getMailBlocks } from '../../tools/get-mail-blocks.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, run } from './support.js'

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0)
const HOUR = 3_600_000
const DAY = 24 * HOUR

describe('getMailBlocks', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const event = (rule: BlockRule, age: number, fields: Partial<BlockEvent> = {}, accountId = env.accountId) =>
    env.services.store.blocks.addEvent(accountId, {
      rule,
      createdAt: NOW - age,
      envFrom: 'sender@example.org',
      messageId: '<m@example.org>',
      subject: 'Hello',
      rcptTo: 'rcpt@example.com',
      ...fields,
    })
  const blocks = (ctx = env.ctx) => run(getMailBlocks, {}, ctx)

  it('is empty for an account with no blocks', async () => {
    const result = await blocks()
    expect(result).toEqual({ local: [], mbtrap: [], subject: [], unsubscribed: [] })
    expect(getMailBlocks.output.parse(result)).toEqual(result)
  })

  it.each([
    ['local', 'LOCAL_BL_RCPT'],
    ['mbtrap', 'MBTRAP'],
  ] as const)(
    'lists %s (%s) events of the last 5 days, newest first, as {date, from, messageId, subject, to}',
    async (key, rule) => {
      await event(rule, 2 * DAY, {
        envFrom: 'two-days@example.org',
        rcptTo: 'a@example.com',
        messageId: '<2@x>',
        subject: 'Two',
      })
      await event(rule, 1 * HOUR, {
        envFrom: 'an-hour@example.org',
        rcptTo: 'b@example.com',
        messageId: null,
        subject: 'One',
      })
      await event(rule, 5 * DAY, { envFrom: 'five-days@example.org' })
      await event(rule, 5 * DAY + 1, { envFrom: 'too-old@example.org' })
      const result = await blocks()
      expect(result[key]).toEqual([
        { date: '2026-11-22', from: 'an-hour@example.org', messageId: null, subject: 'One', to: 'b@example.com' },
        { date: '2026-11-20', from: 'two-days@example.org', messageId: '<2@x>', subject: 'Two', to: 'a@example.com' },
        {
          date: '2026-11-17',
          from: 'five-days@example.org',
          messageId: '<m@example.org>',
          subject: 'Hello',
          to: 'rcpt@example.com',
        },
      ])
      expect(getMailBlocks.output.parse(result)).toEqual(result)
    },
  )

  it('keeps the three categories apart', async () => {
    await event('LOCAL_BL_RCPT', HOUR, { envFrom: 'local@example.org' })
    await event('MBTRAP', HOUR, { envFrom: 'trap@example.org' })
    for (let i = 0; i < 5; i++) await event('SUBJECT', HOUR, { envFrom: 'subject@example.org', subject: 'free smtp' })
    const result = await blocks()
    expect(result.local.map((e) => e.from)).toEqual(['local@example.org'])
    expect(result.mbtrap.map((e) => e.from)).toEqual(['trap@example.org'])
    expect(result.subject).toEqual([{ from: 'subject@example.org', subject: 'free smtp' }])
  })

  describe('subject category (more than 4 identical subjects from one sender in 3 days)', () => {
    it.each<[string, [string, string, number][], { from: string; subject: string }[]]>([
      ['4 identical events are not enough', [['s@example.org', 'socks5 list', 4]], []],
      [
        '5 identical events are listed',
        [['s@example.org', 'socks5 list', 5]],
        [{ from: 's@example.org', subject: 'socks5 list' }],
      ],
      [
        '12 identical events are listed once',
        [['s@example.org', 'socks5 list', 12]],
        [{ from: 's@example.org', subject: 'socks5 list' }],
      ],
      [
        '5 events over two subjects are not',
        [
          ['s@example.org', 'socks5 list', 3],
          ['s@example.org', 'socks4 list', 2],
        ],
        [],
      ],
      [
        '5 events of one subject from two senders are not',
        [
          ['s@example.org', 'smtp', 3],
          ['t@example.org', 'smtp', 2],
        ],
        [],
      ],
    ])('%s', async (_label, groups, expected) => {
      for (const [envFrom, subject, count] of groups)
        for (let i = 0; i < count; i++) await event('SUBJECT', i * HOUR, { envFrom, subject })
      expect((await blocks()).subject).toEqual(expected)
    })

    it('counts only the last 3 days', async () => {
      for (let i = 0; i < 4; i++) await event('SUBJECT', i * HOUR, { subject: 'me@smtp' })
      await event('SUBJECT', 3 * DAY + 1, { subject: 'me@smtp' })
      expect((await blocks()).subject).toEqual([])
      await event('SUBJECT', 3 * DAY, { subject: 'me@smtp' })
      expect((await blocks()).subject).toEqual([{ from: 'sender@example.org', subject: 'me@smtp' }])
    })

    it('lists the most recently active pair first', async () => {
      for (let i = 0; i < 5; i++)
        await event('SUBJECT', DAY + i * HOUR, { envFrom: 'older@example.org', subject: 'smtp relay' })
      for (let i = 0; i < 5; i++)
        await event('SUBJECT', 2 * HOUR + i * HOUR, { envFrom: 'newer@example.org', subject: 'smtp relay' })
      expect((await blocks()).subject.map((p) => p.from)).toEqual(['newer@example.org', 'older@example.org'])
    })
  })

  it('looks back from the clock', async () => {
    await event('MBTRAP', HOUR)
    env.clock.set(NOW + 5 * DAY)
    expect((await blocks()).mbtrap).toHaveLength(0)
    env.clock.set(NOW + 5 * DAY - HOUR)
    expect((await blocks()).mbtrap).toHaveLength(1)
  })

  it("never shows another account's blocks", async () => {
    const other = await env.newAccount()
    await event('LOCAL_BL_RCPT', HOUR, { envFrom: 'theirs@example.org' }, other.accountId)
    await event('MBTRAP', HOUR, { envFrom: 'theirs@example.org' }, other.accountId)
    for (let i = 0; i < 5; i++)
      await event('SUBJECT', HOUR, { envFrom: 'theirs@example.org', subject: 'smtp' }, other.accountId)
    expect(await blocks()).toEqual({ local: [], mbtrap: [], subject: [], unsubscribed: [] })
    expect((await blocks(other.ctx)).local).toHaveLength(1)
  })

  it('refuses a caller without an account (401)', async () => {
    await expectRefused(blocks({ ...env.ctx, accountId: null }), 401, 'API key')
  })
})
