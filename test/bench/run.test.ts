import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { waitFor } from '../system/peers.js'
import { processesNaming, removeRun, startRun as startFigure } from './run-support.js'

// The benchmark must leave nothing behind, also when it is stopped halfway, by a signal or by its
// own deadline. The signal reaches only the runner here (as when a supervisor stops it), so the
// runner itself must stop the server and the sink it started and remove their directories.
describe('bench: a run stopped halfway, or before it starts', () => {
  let tmp: string
  afterEach(() => removeRun(tmp))

  /**
   * `npm run bench -- http` (or another `figure`), writing under a TMPDIR of its own: its children carry that (or the
   * run's own directory under it) in their environment.
   */
  function startRun(env: Record<string, string> = {}, figure = 'http') {
    tmp = mkdtempSync(join(tmpdir(), 'mailroom-bench-interrupt-'))
    return startFigure(figure, tmp, env)
  }

  /** Nothing of the run is left: no file under its TMPDIR, no process. */
  async function nothingLeft() {
    expect(readdirSync(tmp)).toEqual([])
    // A child killed with SIGKILL is gone at once, but may take a moment to leave /proc.
    await waitFor(async () => processesNaming(tmp).length === 0, 5_000)
  }

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`stops what it started and removes what it wrote on ${signal}`, async () => {
      const { run, exited, stderr } = startRun()
      // The sink and the server are running (or starting), with the server's database written.
      await waitFor(async () => {
        if (run.exitCode !== null) throw new Error(`the run ended early: ${stderr()}`)
        let written: string[]
        try {
          written = readdirSync(tmp, { recursive: true }) as string[]
        } catch {
          return false // a directory went away while it was read
        }
        return (
          written.some((f) => /smtp-sink-[^/]+$/.test(f)) &&
          written.some((f) => /http-[^/]+\/mailroom\.db$/.test(f)) &&
          processesNaming(tmp).length >= 3
        )
      }, 20_000)
      run.kill(signal)
      expect(await exited).toBe(code)
      expect(stderr()).toContain(`${signal}: stopping what the benchmark started`)
      await nothingLeft()
    })
  }

  it('ends on its own at its deadline, and leaves nothing behind', async () => {
    const { exited, stderr } = startRun({ BENCH_DEADLINE_SECONDS: '2' })
    expect(await exited).toBe(1)
    expect(stderr()).toContain('the benchmark did not end within 2 s: stopping what it started')
    await nothingLeft()
  })

  it('refuses an unknown figure with the names it has, before it starts anything', async () => {
    const { exited, stderr } = startRun({}, 'nosuch')
    expect(await exited).toBe(2)
    expect(stderr().trim()).toBe(
      'no figures named nosuch: run all of them, or one of http, relay, log, rss, dkim, postgres, cli, inbound, tls, hostile, profile',
    )
    await nothingLeft()
  })
})
