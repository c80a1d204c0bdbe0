import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { describeWith } from './peers.js'

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')
const UNIT = read('docs/mailroom.service')
const installed = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' })
const missing = installed.error
  ? `no systemd-analyze (${installed.error.message}); Debian's package is systemd (test/system/peers.sh installs it)`
  : undefined

describeWith('the systemd unit, docs/mailroom.service', 'has systemd-analyze to check it', missing, () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-unit-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  // verify checks that ExecStart's program exists: the copy runs the node that runs this test,
  // wherever it is installed, with the same arguments.
  const unit = join(dir, 'mailroom.service')
  writeFileSync(unit, UNIT.replace(/^ExecStart=\/usr\/bin\/node /m, `ExecStart=${process.execPath} `))
  const analyze = (...args: string[]) => spawnSync('systemd-analyze', [...args, unit], { encoding: 'utf8' })

  it('runs bin/mailroom.js serve with node', () => {
    expect(UNIT).toMatch(/^ExecStart=\/usr\/bin\/node \/opt\/mailroom\/bin\/mailroom\.js serve$/m)
    expect(readFileSync(unit, 'utf8')).toContain(`ExecStart=${process.execPath} /opt/mailroom/bin/mailroom.js serve`)
  })

  it('passes systemd-analyze verify without a warning', () => {
    const verified = analyze('verify')
    expect(verified.stderr).toBe('')
    expect(verified.status).toBe(0)
  })

  it('keeps its exposure under 2 (of 10) by systemd-analyze security', () => {
    const security = analyze('security', '--offline=true', '--threshold=20')
    expect(security.stdout).toMatch(/Overall exposure level for mailroom\.service: 1\.\d/)
    expect(security.status).toBe(0)
  })

  it("leaves out MemoryDenyWriteExecute: Node's JIT writes the code it runs", () => {
    expect(UNIT).not.toMatch(/^MemoryDenyWriteExecute=/m)
  })

  it('has each of its settings explained in docs/operations.md', () => {
    const operations = read('docs/operations.md')
    const keys = [...UNIT.matchAll(/^#?(\w+)=/gm)].map((m) => m[1])
    expect(keys.length).toBeGreaterThan(30)
    expect([...new Set(keys)].filter((k) => !operations.includes(`\`${k}=`))).toEqual([])
  })
})
