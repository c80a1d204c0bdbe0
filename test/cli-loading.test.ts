import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// What each command of the package's bin loads before it answers: a user waits for every module
// at every call (the figures are bench #9's). A module hook in the child names each module it loads.

const BIN = fileURLToPath(new URL('../bin/mailroom.js', import.meta.url))
const ROOT = fileURLToPath(new URL('..', import.meta.url))
// In-thread hooks (module.registerHooks), whose writes reach stderr before the process ends: those
// of module.register run on a thread of their own, and a command that exits at once (--help) loses them.
const HOOKS = `import { registerHooks } from 'node:module'
registerHooks({
  load(url, context, next) {
    if (url.startsWith('file:')) process.stderr.write('loaded ' + url + '\\n')
    return next(url, context)
  },
})`
const WITH_HOOKS = ['--import', `data:text/javascript,${encodeURIComponent(HOOKS)}`, BIN]

/** The packages and the project's own modules (under dist/) a run loaded, from its stderr. */
function loadedBy(stderr: string): { packages: Set<string>; own: Set<string> } {
  const files = [...stderr.matchAll(/^loaded (file:\S+)$/gm)].map((m) => fileURLToPath(m[1]))
  const packages = files
    .map((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f)?.[1])
    .filter((p): p is string => p !== undefined)
  const own = files.filter((f) => f.startsWith(join(ROOT, 'dist'))).map((f) => f.slice(ROOT.length))
  return { packages: new Set(packages), own: new Set(own) }
}

/** Modules no admin command needs: the server, its doors, the relay's pipeline, the tools. */
const SERVER_PACKAGES = ['hono', '@hono/node-server', '@modelcontextprotocol/sdk', 'smtp-server', 'pino', 'chrono-node']

describe('mailroom command: what a command loads', () => {
  let dataDir: string
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-cli-loading-'))
  })
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  const run = (args: string[], env: Record<string, string> = {}) => {
    const r = spawnSync(process.execPath, [...WITH_HOOKS, ...args], {
      env: { ...process.env, MAILROOM_DATA_DIR: dataDir, ...env },
      encoding: 'utf8',
      timeout: 60_000,
    })
    expect(r.status, r.stderr).toBe(0)
    return { stdout: r.stdout, ...loadedBy(r.stderr) }
  }

  it('answers --help with commander and the command definitions only', () => {
    const { stdout, packages, own } = run(['--help'])
    expect(stdout).toContain('Usage: mailroom')
    // nodemailer's address parser alone, for the parsers of --sender and the like.
    expect([...packages].sort()).toEqual(['commander', 'nodemailer'])
    expect([...own].filter((f) => !f.startsWith('dist/cli/')).sort()).toEqual([
      'dist/accounts.js',
      'dist/errors.js',
      'dist/esm-resolve.js',
      'dist/package-info.js',
      'dist/relay/addresses.js',
      'dist/storage/approval.js',
      'dist/storage/secrets.js',
      'dist/storage/store.js',
      'dist/transports/toolsets.js',
    ])
  })

  it('answers queue list from the configuration and the store alone', () => {
    const apiKey = JSON.parse(run(['account', 'create', '--json']).stdout).apiKey
    expect(apiKey).toMatch(/^mr_/)
    const { stdout, packages, own } = run(['queue', 'list'])
    expect(stdout).toBe('nothing waits in the queue\n')
    expect(packages).toContain('better-sqlite3')
    expect(own).toContain('dist/storage/sqlite/index.js')
    expect(SERVER_PACKAGES.filter((p) => packages.has(p))).toEqual([])
    // transports/toolsets.js is the table of toolsets that `stdio --tools` lists in its --help: no imports but errors.js.
    expect(
      [...own].filter(
        (f) => /^dist\/(tools|transports)\/|^dist\/relay\/pipeline/.test(f) && f !== 'dist/transports/toolsets.js',
      ),
    ).toEqual([])
  })

  it('answers stdio with the English date parser only, of the sixteen languages of chrono-node', async () => {
    const apiKey = JSON.parse(run(['account', 'create', '--json']).stdout).apiKey
    const child = spawn(process.execPath, [...WITH_HOOKS, 'stdio'], {
      env: { ...process.env, MAILROOM_DATA_DIR: dataDir, MAILROOM_API_KEY: apiKey },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.stdin.write(
      `${JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
      })}\n`,
    )
    await expect.poll(() => stdout, { timeout: 60_000 }).toContain('\n')
    child.stdin.end()
    expect(await exited).toBe(0)
    expect(JSON.parse(stdout).result.serverInfo).toMatchObject({ name: 'mailroom' })
    const chrono = [...stderr.matchAll(/chrono-node\/dist\/esm\/locales\/([^/]+)\//g)].map((m) => m[1])
    expect(chrono).toContain('en')
    expect(new Set(chrono)).toEqual(new Set(['en']))
  })
})
