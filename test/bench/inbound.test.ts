import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { DNSMASQ, describeWith } from '../system/peers.js'
import { installed, removeRun, startRun } from './run-support.js'

/** Why #10 cannot run here, if it cannot: it needs dnsmasq, and Postfix (which the bench installs as root). */
function missing(): string | undefined {
  if (!existsSync(DNSMASQ)) return `${DNSMASQ} is missing: run test/system/peers.sh`
  if (!installed('postfix') && process.getuid?.() !== 0) return 'Postfix is not installed, and installing it needs root'
  return undefined
}

describeWith('bench #10: the MX door against Postfix', 'dnsmasq and Postfix', missing(), () => {
  let tmp: string
  afterEach(() => removeRun(tmp))

  it('runs at a tiny scale: both MX hosts take the load, the memory is measured, nothing is left', async () => {
    tmp = mkdtempSync(join(tmpdir(), 'mailroom-bench-inbound-'))
    // Postfix drops privileges: its users must reach the run's directory under this one.
    chmodSync(tmp, 0o755)
    const run = startRun('inbound', tmp, { BENCH_MESSAGES: '20', BENCH_INBOUND_MB: '1' })
    expect(await run.exited, run.stdout() + run.stderr()).toBe(0)
    const rows = run
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('| 10 |'))
    expect(rows.map((r) => r.split(' | ')[1])).toEqual([
      'MX door, 20 × 4 KB, 16 connections, SPF, DKIM and DMARC checked, each in its inbox at 250',
      'Postfix, until its last 250 (queued, not yet in the Maildir; for scale)',
      'peak RSS growth: one 1 MB message (an attachment) through the MX door',
    ])
    // Each a measured rate (or size), and the first two ratios measured against their baselines.
    const [door, postfix, memory] = rows.map((r) => r.split(' | '))
    expect(Number.parseFloat(door[2])).toBeGreaterThan(0)
    expect(Number.parseFloat(door[4])).toBeGreaterThan(0)
    expect(Number.parseFloat(door[5])).toBeGreaterThan(0)
    expect(Number.parseFloat(postfix[2])).toBeGreaterThan(0)
    expect(memory[3]).toMatch(/^idle RSS \d+ MB; the message 1 MB$/)
    // Nothing left: no file, and the Postfix instance no longer named in the system's configuration.
    expect(readdirSync(tmp)).toEqual([])
    expect(execFileSync('postconf', ['-h', 'alternate_config_directories'], { encoding: 'utf8' })).not.toContain(tmp)
  }, 180_000)

  it('undoes a Postfix start that fails halfway', async () => {
    // Left 0700, the run's directory is out of reach of Postfix's users: its start names the
    // instance in the system's configuration, then its check fails.
    tmp = mkdtempSync(join(tmpdir(), 'mailroom-bench-inbound-'))
    const run = startRun('inbound', tmp, { BENCH_MESSAGES: '4', BENCH_INBOUND_MB: '1' })
    expect(await run.exited).toBe(1)
    expect(run.stdout() + run.stderr()).toContain('postfix.sh virtual')
    expect(readdirSync(tmp)).toEqual([])
    expect(execFileSync('postconf', ['-h', 'alternate_config_directories'], { encoding: 'utf8' })).not.toContain(tmp)
  }, 180_000)
})
