import { execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

// What the tests of `npm run bench` share: its built runner in a process of its own, and the
// processes and files it may leave behind.

const RUN = fileURLToPath(new URL('../../dist/bench/run.js', import.meta.url))

/**
 * `npm run bench -- figure` (the built runner), writing under `tmp` as its TMPDIR; its output is
 * collected as it comes.
 */
export function startRun(figure: string, tmp: string, env: Record<string, string> = {}) {
  const run = spawn(process.execPath, [RUN, figure], {
    env: { ...process.env, TMPDIR: tmp, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  run.stdout.on('data', (d) => (stdout += d))
  run.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => run.once('exit', (c) => resolve(c)))
  return { run, exited, stdout: () => stdout, stderr: () => stderr }
}

/**
 * Pids of the processes that name `dir` in their command line or environment: the children of a
 * run inherit its TMPDIR (`dir` or under it), and the daemons it starts, Postfix's master and
 * OpenDKIM, name their directories under it.
 */
export function processesNaming(dir: string): number[] {
  const pids: number[] = []
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (['cmdline', 'environ'].some((f) => readFileSync(`/proc/${pid}/${f}`, 'latin1').includes(dir)))
        pids.push(Number(pid))
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids
}

/** Stops whatever a run left under `dir` (it must not outlive its test), then removes `dir`. */
export function removeRun(dir: string): void {
  for (const pid of processesNaming(dir)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone meanwhile
    }
  }
  rmSync(dir, { recursive: true, force: true })
}

/** Whether `command` is on the PATH. */
export function installed(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
