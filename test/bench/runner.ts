import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** The bench's runner, as `npm run bench` starts it (built). */
export const RUN = fileURLToPath(new URL('../../dist/bench/run.js', import.meta.url))

/** Pids of the processes whose TMPDIR is `dir` or under it (the children of a run inherit theirs). */
export function processesUnder(dir: string): number[] {
  const pids: number[] = []
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (
        readFileSync(`/proc/${pid}/environ`, 'latin1')
          .split('\0')
          .some((e) => e === `TMPDIR=${dir}` || e.startsWith(`TMPDIR=${dir}/`))
      )
        pids.push(Number(pid))
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids
}

/** Stops whatever a run left under `dir` (it must not outlive the test), then removes `dir`. */
export function removeRun(dir: string): void {
  for (const pid of processesUnder(dir)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone meanwhile
    }
  }
  rmSync(dir, { recursive: true, force: true })
}

/** `npm run bench -- <figure>` (built) in a process of its own, until it exits: its status and output. */
export async function runBench(
  figure: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const run = spawn(process.execPath, [RUN, figure], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  run.stdout.on('data', (d) => (stdout += d))
  run.stderr.on('data', (d) => (stderr += d))
  const code = await new Promise<number | null>((resolve) => run.once('exit', (c) => resolve(c)))
  return { code, stdout, stderr }
}
