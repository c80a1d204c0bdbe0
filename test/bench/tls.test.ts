import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { describeWith, SMTP_SINK, waitFor } from '../system/peers.js'
import { installed, processesNaming, removeRun, startRun } from './run-support.js'

/** Why #11 cannot run here, if it cannot: it needs smtp-sink, and Postfix and OpenDKIM (which the bench installs as root). */
function missing(): string | undefined {
  if (!existsSync(SMTP_SINK)) return `${SMTP_SINK} is missing: run test/system/peers.sh`
  if (!(installed('postfix') && installed('opendkim')) && process.getuid?.() !== 0)
    return 'Postfix or OpenDKIM is not installed, and installing them needs root'
  return undefined
}

describeWith(
  'bench #11: relaying with TLS and DKIM against Postfix',
  'smtp-sink, Postfix and OpenDKIM',
  missing(),
  () => {
    let tmp: string
    afterEach(() => removeRun(tmp))

    it('runs at a tiny scale: every leg relays, both signers verify, nothing is left', async () => {
      tmp = mkdtempSync(join(tmpdir(), 'mailroom-bench-tls-'))
      // Postfix and OpenDKIM drop privileges: their users must reach the run's directory under this one.
      chmodSync(tmp, 0o755)
      const run = startRun('tls', tmp, { BENCH_MESSAGES: '40', BENCH_ROUNDS: '1' })
      expect(await run.exited, run.stdout() + run.stderr()).toBe(0)
      // A message from each signer verified, by the key each publishes.
      const verified = /#11 verified by mailauth: (.*)/.exec(run.stderr())?.[1] ?? ''
      expect(verified).toContain('bench.example/opendkim: pass')
      expect(verified).toMatch(/bench\.example\/mr-\d{8}: pass/)
      const rows = run
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('| 11 |'))
        .map((r) => r.split(' | '))
      expect(rows.map((r) => [r[1], r[3]])).toEqual([
        [
          'SMTP relay end to end, STARTTLS + AUTH, 10 × 4 KB a leg, 16 sessions',
          'Postfix with STARTTLS, same load and sink',
        ],
        [
          'the same, DKIM-signed (RSA 2048, relaxed/relaxed)',
          'Postfix + OpenDKIM milter (RSA 2048, relaxed/relaxed), STARTTLS',
        ],
        ['the same, DKIM-signed', 'the same, unsigned'],
        ['POST /mail/send end to end, 10 × 4 KB a leg, 16 connections', 'Postfix without TLS, same load and sink'],
      ])
      // Each leg measured: a rate, its baseline's and their ratio.
      for (const r of rows) for (const column of [2, 4, 5]) expect(Number.parseFloat(r[column])).toBeGreaterThan(0)
      // Nothing left: no file, no process (OpenDKIM included), and neither Postfix instance named in
      // the system's configuration.
      expect(readdirSync(tmp)).toEqual([])
      await waitFor(async () => processesNaming(tmp).length === 0, 5_000)
      expect(execFileSync('postconf', ['-h', 'alternate_config_directories'], { encoding: 'utf8' })).not.toContain(tmp)
    }, 180_000)
  },
)
