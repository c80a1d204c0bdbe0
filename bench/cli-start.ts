import { spawn, spawnSync } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { BIN } from '../test/system/peers.js'

// #9: how long the `mailroom` command takes to answer, from the start of its process, against the
// start of a bare Node process. What a user waits for at each call; the machine's load lands on
// every leg alike because they run in turns.

/** The start of each kind of call, in milliseconds: the median of the rounds. */
export interface CliStart {
  /** `node -e 0`: the baseline, a Node process that does nothing. */
  node: number
  /** `mailroom --help`, until the process exits. */
  help: number
  /** `mailroom queue list` on a data directory, until the process exits. */
  queue: number
  /** `mailroom stdio`: until its answer to an MCP `initialize` written at once to its stdin. */
  initialize: number
}

/** Milliseconds from spawning `args` until it exits with status 0. */
function untilExit(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`node ${args.join(' ')} exited ${code}: ${stderr}`))
      else resolve(performance.now() - started)
    })
  })
}

const INITIALIZE = `${JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
})}\n`

/**
 * Milliseconds from spawning `mailroom stdio` until its answer to `initialize`, written to its stdin
 * at once, as an MCP client sees it. Then stdin ends, and the process is waited for (not counted).
 */
function untilInitialized(env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, [BIN, 'stdio'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  child.stdin.write(INITIALIZE)
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  return new Promise((resolve, reject) => {
    let answered: number | undefined
    child.stdout.on('data', (d) => {
      stdout += d
      if (answered === undefined && stdout.includes('\n')) {
        answered = performance.now() - started
        const reply = JSON.parse(stdout.slice(0, stdout.indexOf('\n')))
        if (reply.result?.serverInfo?.name !== 'mailroom') reject(new Error(`initialize: ${stdout}`))
        // The client goes away: the process ends as it does when its assistant quits.
        child.stdin.end()
      }
    })
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0 || answered === undefined) reject(new Error(`mailroom stdio exited ${code}: ${stderr}`))
      else resolve(answered)
    })
  })
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * Runs each kind of call once a round, in turns, `rounds` times after a round that warms the
 * disk cache (and Node's compile cache, where there is one) and is not counted, over a data
 * directory of its own made by `mailroom account create`.
 */
export async function measureCliStart(dataDir: string, rounds: number): Promise<CliStart> {
  const env = { ...process.env, MAILROOM_DATA_DIR: dataDir }
  const created = spawnSync(process.execPath, [BIN, 'account', 'create', '--json'], { env, encoding: 'utf8' })
  if (created.status !== 0) throw new Error(`mailroom account create: ${created.stderr}`)
  const withKey = { ...env, MAILROOM_API_KEY: JSON.parse(created.stdout).apiKey }
  const times: Record<keyof CliStart, number[]> = { node: [], help: [], queue: [], initialize: [] }
  for (let round = 0; round <= rounds; round++) {
    const node = await untilExit(['-e', '0'], env)
    const help = await untilExit([BIN, '--help'], env)
    const queue = await untilExit([BIN, 'queue', 'list'], env)
    const initialize = await untilInitialized(withKey)
    if (round === 0) continue
    times.node.push(node)
    times.help.push(help)
    times.queue.push(queue)
    times.initialize.push(initialize)
  }
  return {
    node: median(times.node),
    help: median(times.help),
    queue: median(times.queue),
    initialize: median(times.initialize),
  }
}
