import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../config.js'
import { createServices } from '../runtime.js'
import { openDataDir } from '../storage/sqlite/index.js'
import { runCli, silentLogger } from './helpers.js'
import { holdMessage } from './tools/held.js'

describe('mailroom approvals and the policy commands', () => {
  let dataDir: string
  const run = (...args: string[]) => runCli(args, { MAILROOM_DATA_DIR: dataDir })
  const json = async (...args: string[]) => {
    const r = await run(...args)
    expect(r.status, r.stderr).toBe(0)
    return JSON.parse(r.stdout)
  }
  /** The command fails with exit status 1, saying `message`, and prints nothing else. */
  const refused = async (message: string, ...args: string[]) => {
    const r = await run(...args)
    expect(r.status, args.join(' ')).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).toContain(message)
  }
  beforeEach(() => (dataDir = mkdtempSync(join(tmpdir(), 'mailroom-cli-approvals-'))))
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  /** Messages of account 1's order 1 held for approval, as the pipeline stores them. */
  async function held(count: number): Promise<string[]> {
    const store = openDataDir(dataDir)
    try {
      const services = createServices(store, loadConfig({ MAILROOM_DATA_DIR: dataDir }), {
        logger: silentLogger,
        clock: Date.now,
      })
      const txids: string[] = []
      for (let i = 0; i < count; i++)
        txids.push((await holdMessage(services, { accountId: 1, orderId: 1 }, { subject: `held ${i}` })).txid)
      return txids
    } finally {
      await store.close()
    }
  }

  it('lists held messages, approves and rejects them once, and says how one was decided', async () => {
    await json('account', 'create', '--json')
    await json('order', 'create', '--account', '1', '--json')
    const [first, second] = await held(2)
    const listed = await run('approvals', 'list')
    expect(listed.status, listed.stderr).toBe(0)
    expect(listed.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(`^${second}\\theld\\taccount 1\\tagent@example.org -> bob@example.com\\theld 1\\t`),
      ),
      expect.stringMatching(new RegExp(`^${first}\\theld\\taccount 1\\t.*\\texpires \\d{4}-`)),
    ])
    expect(await json('approvals', 'list', '--account', '1', '--json')).toMatchObject({
      total: 2,
      approvals: [{ id: second, status: 'held', holder: 'API key 1' }, { id: first }],
    })

    const approved = await run('approvals', 'approve', first.toUpperCase())
    expect(approved).toMatchObject({ status: 0, stdout: `${first} approved: queued for delivery\n` })
    await refused(`message ${first} was not approved: it was approved at `, 'approvals', 'approve', first)
    expect((await run('approvals', 'reject', first)).stderr).toContain('by the operator (mailroom approvals)')
    expect((await run('approvals', 'reject', second)).stdout).toBe(`${second} rejected: it will never be sent\n`)
    await refused(`message ${second} was not approved: it was rejected at `, 'approvals', 'approve', second)

    expect((await run('approvals', 'list')).stdout).toBe('no held messages\n')
    expect(await json('approvals', 'list', '--status', 'all', '--json')).toMatchObject({
      total: 2,
      approvals: [
        { id: second, status: 'rejected', decidedBy: 'the operator (mailroom approvals)' },
        { id: first, status: 'approved', decidedBy: 'the operator (mailroom approvals)' },
      ],
    })
    await refused('no held message 0190f3a2b4c5d6e7f8', 'approvals', 'approve', '0190f3a2b4c5d6e7f8')
    const bad = await run('approvals', 'approve', 'nope')
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain('must be a transaction id')
  })

  it('prints and sets the send policy of a key, a grant and an order', async () => {
    await json('account', 'create', '--json')
    await json('order', 'create', '--account', '1', '--json')
    expect((await run('account', 'key', 'policy', '1')).stdout).toBe('send policy of API key 1: none\n')
    const set = await run(
      'account',
      'key',
      'policy',
      '1',
      '--approval',
      'always',
      '--max-per-hour',
      '20',
      '--allow',
      'Bob@Example.com,@example.org',
      '--allow',
      'carol@example.net',
    )
    expect(set.stdout).toBe(
      'send policy of API key 1 set: approve every send; 20/hour; only to bob@example.com, @example.org, carol@example.net\n',
    )
    // By its prefix, as `key list` prints it; a change keeps what it does not name.
    const [{ prefix }] = await json('account', 'key', 'list', '--account', '1', '--json')
    expect(
      await json('account', 'key', 'policy', `${prefix}…`, '--max-per-hour', 'off', '--allow', 'any', '--json'),
    ).toEqual({
      holder: 'API key 1',
      changed: true,
      policy: { approval: 'always', approveAbove: null, maxPerHour: null, maxPerDay: null, allowedRecipients: [] },
      summary: 'approve every send',
    })
    expect((await run('account', 'key', 'policy', '1', '--clear')).stdout).toBe('send policy of API key 1 set: none\n')
    expect(
      (
        await run(
          'order',
          'policy',
          '1',
          '--approval',
          'new-recipients',
          '--approve-above',
          '10',
          '--max-per-day',
          '100',
        )
      ).stdout,
    ).toBe('send policy of mail order mb1 set: approve new recipients; approve above 10 recipients; 100/day\n')

    // Refusals change nothing.
    await refused('no mail order mb9', 'order', 'policy', '9', '--approval', 'always')
    await refused('no OAuth grant 5', 'account', 'grant', 'policy', '5')
    await refused('no key mr_nothing', 'account', 'key', 'policy', 'mr_nothing')
    await refused('no API key 7', 'account', 'key', 'policy', '7', '--approval', 'always')
    await refused(
      '--clear removes the policy: give it alone',
      'order',
      'policy',
      '1',
      '--clear',
      '--approval',
      'always',
    )
    for (const [args, message] of [
      [['--approval', 'sometimes'], '--approval must be one of none, new-recipients, always'],
      [['--max-per-hour', '0'], '--max-per-hour must be a positive integer'],
      [['--allow', 'not an address'], '"not an address" is not an address or @domain'],
    ] as const) {
      const r = await run('order', 'policy', '1', ...args)
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain(message)
    }
    expect((await run('order', 'policy', '1')).stdout).toBe(
      'send policy of mail order mb1: approve new recipients; approve above 10 recipients; 100/day\n',
    )
  })
})
