import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { runCli } from './helpers.js'

describe('mailroom domain receive and mailroom inbox', () => {
  let dataDir: string
  const settings = () => ({ MAILROOM_DATA_DIR: dataDir, MAILROOM_MX_HOSTNAME: 'mx.mailroom.example' })
  const run = (...args: string[]) => runCli(args, settings())
  const json = async (...args: string[]) => {
    const r = await run(...args)
    expect(r.status, r.stderr).toBe(0)
    return JSON.parse(r.stdout)
  }
  beforeEach(() => (dataDir = mkdtempSync(join(tmpdir(), 'mailroom-cli-inbox-'))))
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  it('makes a sending domain receive, prints its MX record, and manages its inboxes', async () => {
    const { id } = await json('account', 'create', '--json')
    const other = await json('account', 'create', '--json')
    const a = ['--account', String(id)]
    await json('domain', 'add', 'acme.example', ...a, '--algorithm', 'ed25519', '--json')
    const received = await run('domain', 'receive', 'acme.example', ...a)
    expect(received.status, received.stderr).toBe(0)
    expect(received.stdout).toBe(
      [
        'acme.example receives mail for its inboxes (mailroom inbox add).',
        'Publish this DNS record (type, name, value):',
        'MX\tacme.example\t10 mx.mailroom.example.',
        'The MX door must be reachable there on port 25 (MAILROOM_MX_HOSTNAME names this server).',
        '',
      ].join('\n'),
    )
    // With a return path, both commands name its records.
    const withReturnPath = { ...settings(), MAILROOM_RETURN_PATH: 'bounces' }
    const addedRp = await runCli(['domain', 'add', 'news.example', ...a], withReturnPath)
    expect(addedRp.stdout).toContain('TXT\tbounces.news.example\tv=spf1 a:')
    expect(addedRp.stdout).toContain(
      "Return path: bounces.news.example is the envelope sender of news.example's mail once the domain receives (mailroom domain receive prints its MX record).",
    )
    const receivedRp = await runCli(['domain', 'receive', 'news.example', ...a], withReturnPath)
    expect(receivedRp.stdout).toContain(
      'Publish these DNS records (type, name, value):\nMX\tnews.example\t10 mx.mailroom.example.\nMX\tbounces.news.example\t10 mx.mailroom.example.\n',
    )
    expect(await json('domain', 'receive', 'acme.example', ...a, '--catch-all', '--json')).toMatchObject({
      receiving: true,
      catchAll: true,
    })
    const added = await run('inbox', 'add', 'Support@acme.example', ...a)
    expect(added.stdout).toBe('inbox 1 added: support@acme.example\n')
    expect((await run('inbox', 'list', ...a)).stdout).toBe('1\tsupport@acme.example\t0 messages\t0 unread\t0 bytes\n')
    expect((await run('inbox', 'list', '--account', String(other.id))).stdout).toBe('no inboxes\n')
    // Refusals: nothing changes.
    for (const [args, message] of [
      [['inbox', 'add', 'support@acme.example', ...a], 'support@acme.example is an inbox already'],
      [['inbox', 'add', 'x@acme.example', '--account', String(other.id)], 'acme.example is not a receiving domain'],
      [['inbox', 'remove', '1', '--account', String(other.id)], 'id: inbox 1 not found'],
      [['domain', 'receive', 'acme.example', '--account', String(other.id)], 'not a sending domain of this account'],
      [['inbox', 'list', '--account', '99'], 'no account 99'],
    ] as const) {
      const r = await run(...args)
      expect(r.status, args.join(' ')).not.toBe(0)
      expect(r.stderr).toContain(message)
    }
    expect(await json('inbox', 'list', ...a, '--json')).toMatchObject([{ id: 1, address: 'support@acme.example' }])
    expect((await run('inbox', 'remove', '1', ...a)).stdout).toBe('inbox 1 deleted\n')
    expect((await run('inbox', 'list', ...a)).stdout).toBe('no inboxes\n')
    expect((await run('domain', 'receive', 'acme.example', ...a, '--off')).stdout).toBe(
      'acme.example no longer receives mail; its inboxes and their messages are kept\n',
    )
    expect((await run('inbox', 'add', 'x@acme.example', ...a)).stderr).toContain('not a receiving domain')
  })
})
