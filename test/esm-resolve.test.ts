import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { drizzleInternal } from '../esm-resolve.js'

// As built: bin/mailroom.js and the threads load dist/esm-resolve.js.
const HOOK = new URL('../dist/esm-resolve.js', import.meta.url).href

// A resolve hook registered before the one under test runs after it: it sees only the imports that
// reach Node's own resolver, the one that parses drizzle-orm's package.json again each time. It
// counts those made inside drizzle-orm by relative path and prints the count at exit.
const COUNTER = `import { registerHooks } from 'node:module'
let n = 0
registerHooks({
  resolve(specifier, context, next) {
    if (context.parentURL?.includes('/node_modules/drizzle-orm/') && specifier.startsWith('.')) n++
    return next(specifier, context)
  },
})
process.on('exit', () => console.log(\`\${n} reached Node\`))
`
const LOAD = `const sqlite = await import(${JSON.stringify(import.meta.resolve('drizzle-orm/sqlite-core'))})
const pg = await import(${JSON.stringify(import.meta.resolve('drizzle-orm/pg-core'))})
if (typeof sqlite.sqliteTable !== 'function' || typeof pg.pgTable !== 'function') process.exit(2)
`

describe('resolving drizzle-orm without its package.json', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-esm-'))
    writeFileSync(join(dir, 'counter.mjs'), COUNTER)
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  /** Runs the ES module `main` in a new process, with the counter and then `imports` loaded first. */
  const run = (main: string, ...imports: string[]) => {
    writeFileSync(join(dir, 'main.mjs'), main)
    const flags = [join(dir, 'counter.mjs'), ...imports].flatMap((i) => ['--import', i])
    const r = spawnSync(process.execPath, [...flags, join(dir, 'main.mjs')], { encoding: 'utf8', timeout: 60_000 })
    return { status: r.status, stdout: r.stdout, stderr: r.stderr }
  }

  it("loads drizzle-orm's modules without Node's look-up, in the command's process and in a thread", () => {
    const without = run(LOAD)
    expect(without.status).toBe(0)
    expect(Number(/(\d+) reached Node/.exec(without.stdout)?.[1])).toBeGreaterThan(50)

    expect(run(LOAD, HOOK)).toEqual({ status: 0, stdout: '0 reached Node\n', stderr: '' })

    // A thread started as the engine and the log's reader are: the process's flags, and the hook.
    writeFileSync(join(dir, 'load.mjs'), LOAD)
    const thread = `const { startThread } = await import(${JSON.stringify(HOOK)})
startThread(new URL('./load.mjs', import.meta.url), {})
`
    const threaded = run(thread)
    expect(threaded.stderr).toBe('')
    expect(threaded.status).toBe(0)
    // The main thread imported no drizzle module; the thread counted its own.
    expect(threaded.stdout.split('\n').filter(Boolean).sort()).toEqual(['0 reached Node', '0 reached Node'])
  })

  it("starts a thread beside the options a thread refuses (V8's, the process's), which hold for the process anyway", () => {
    writeFileSync(
      join(dir, 'main.mjs'),
      `const { startThread } = await import(${JSON.stringify(HOOK)})
startThread(new URL('./thread.mjs', import.meta.url), {})
`,
    )
    // What the thread was given: its options, the hook's pair left out.
    writeFileSync(
      join(dir, 'thread.mjs'),
      "console.log(JSON.stringify(process.execArgv.filter((a) => a !== '--import' && !a.endsWith('esm-resolve.js'))))\n",
    )
    const started = (...options: string[]) => {
      const r = spawnSync(process.execPath, [...options, join(dir, 'main.mjs')], { encoding: 'utf8', timeout: 60_000 })
      expect(r.stderr).toBe('')
      expect(r.status).toBe(0)
      return JSON.parse(r.stdout)
    }
    expect(started('--conditions=mailroom-test')).toEqual(['--conditions=mailroom-test'])
    expect(started('--max-old-space-size=256', '--conditions=mailroom-test', '--stack-trace-limit=5')).toEqual([
      '--conditions=mailroom-test',
    ])
    expect(started('--title=mailroom-test')).toEqual([])
  })

  it.each([
    [
      './sql/sql.js',
      'file:///app/node_modules/drizzle-orm/table.js',
      'file:///app/node_modules/drizzle-orm/sql/sql.js',
    ],
    [
      '../table.js',
      'file:///app/node_modules/drizzle-orm/pg-core/table.js',
      'file:///app/node_modules/drizzle-orm/table.js',
    ],
    ['../../x.js', 'file:///app/node_modules/drizzle-orm/pg-core/table.js', undefined],
    ['drizzle-orm/sql', 'file:///app/node_modules/drizzle-orm/table.js', undefined],
    ['./table.cjs', 'file:///app/node_modules/drizzle-orm/index.cjs', undefined],
    ['./table.js', 'file:///app/node_modules/hono/dist/index.js', undefined],
    ['./table.js', undefined, undefined],
  ])('%s from %s leads to %s', (specifier, parent, expected) => {
    expect(drizzleInternal(specifier, parent)).toBe(expected)
  })
})
