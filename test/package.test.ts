import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// npm 11's `npx mailroom` (or `npm exec mailroom`) in the project folder installs the folder into
// its npx cache to run the bin, and that runs its prepare script with npm_command=exec: the whole
// build again (75 s). The build is made once, by `npm install`.

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const PREPARE: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.prepare

describe('package.json: prepare', () => {
  // A PATH with node and without npm: where prepare would build, `npm run build` is not found (127).
  let bin: string
  beforeEach(() => {
    bin = mkdtempSync(join(tmpdir(), 'mailroom-prepare-'))
    symlinkSync(process.execPath, join(bin, 'node'))
  })
  afterEach(() => rmSync(bin, { recursive: true, force: true }))

  const prepare = (cwd: string, npmCommand: string) =>
    spawnSync('/bin/sh', ['-c', PREPARE], { cwd, env: { PATH: bin, npm_command: npmCommand }, encoding: 'utf8' })

  it('leaves the build alone when npm exec installs the folder to run its bin', () => {
    const r = prepare(ROOT, 'exec')
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
  })

  it('builds on npm install, and under npm exec where there is no build yet', () => {
    for (const [cwd, npmCommand] of [
      [ROOT, 'install'],
      [bin, 'exec'],
    ]) {
      const r = prepare(cwd, npmCommand)
      expect(r.status).toBe(127)
      expect(r.stderr).toMatch(/npm: .*not found/)
    }
  })
})
