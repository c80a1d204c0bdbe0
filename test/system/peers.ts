import { spawn, type ChildProcess } from 'node:child_process'
import {
  chmodSync,
  closeSync,
  existsSync,
  fstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
} from 'node:fs'
import { createServer, Socket, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'vitest'

// The outside programs of the system tests (installed by test/system/peers.sh) and the product
// itself, each a real process.

/** The package root: the nearest folder above with package.json (this file also runs from dist/, in bench). */
const ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    if (dirname(dir) === dir) throw new Error('package.json not found')
    dir = dirname(dir)
  }
  return dir
})()
export const BIN = join(ROOT, 'bin/mailroom.js')
const POSTFIX = join(ROOT, '.peers/postfix')
export const SMTP_SINK = join(POSTFIX, 'usr/sbin/smtp-sink')

/**
 * Registers `suite` when what it needs is there (`missing` undefined). Without it, in CI (CI=true)
 * a test named `needs` that fails with the reason stands in its place; elsewhere the suite is
 * skipped with a warning that says why.
 */
export function describeWith(name: string, needs: string, missing: string | undefined, suite: () => void): void {
  if (missing === undefined) {
    suite()
    return
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it(needs, () => {
        throw new Error(missing)
      })
    })
    return
  }
  console.warn(`SKIPPED ${name}: ${missing}`)
  describe.skip(name, () => {
    it(needs, () => {})
  })
}

export function requirePeers(): void {
  if (!existsSync(SMTP_SINK)) throw new Error(`${SMTP_SINK} is missing: run test/system/peers.sh (npm test does)`)
}

/** A port that was free a moment ago (smtp-sink needs one on its command line). */
export async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

export interface SinkMessage {
  from: string
  to: string[]
  text: string
}

/**
 * Postfix's smtp-sink on 127.0.0.1, dumping every message it accepts into a directory. With
 * `dump: false` it only counts them (its `-c` counters): the bench's stand-in for other
 * machines' MX hosts then writes no file per message on the machine being measured. The counters
 * go to a file, read only when asked: a pipe would wake this process for every message, on the
 * cores being measured.
 */
export async function startSmtpSink(extraArgs: string[] = [], { dump = true } = {}) {
  requirePeers()
  const dir = mkdtempSync(join(tmpdir(), 'smtp-sink-'))
  // smtp-sink, run as root, drops to nobody before it writes the dumps.
  chmodSync(dir, 0o777)
  const port = await freePort()
  const asRoot = process.getuid?.() === 0 ? ['-u', 'nobody'] : []
  const counters = join(dir, 'counters')
  const out = dump ? 'ignore' : openSync(counters, 'w')
  const child = spawn(
    SMTP_SINK,
    [...asRoot, ...extraArgs, ...(dump ? ['-d', `${dir}/%M.`] : ['-c']), `127.0.0.1:${port}`, '256'],
    {
      env: { ...process.env, LD_LIBRARY_PATH: join(POSTFIX, 'usr/lib/postfix') },
      stdio: ['ignore', out, 'pipe'],
    },
  )
  if (typeof out === 'number') closeSync(out)
  let stderr = ''
  child.stderr!.on('data', (d) => (stderr += d))
  // -c writes a line of counters (`sess=2 quit=2 mesg=5\r`) after each message: the last one counts.
  const counted = () => {
    const fd = openSync(counters, 'r')
    try {
      const tail = Buffer.alloc(200)
      const read = readSync(fd, tail, 0, tail.length, Math.max(0, fstatSync(fd).size - tail.length))
      const all = [...tail.toString('latin1', 0, read).matchAll(/mesg=(\d+)\r/g)]
      return all.length > 0 ? Number(all[all.length - 1][1]) : 0
    } finally {
      closeSync(fd)
    }
  }
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`smtp-sink exited: ${stderr}`)
    return canConnect(port)
  })
  return {
    port,
    /** How many messages it has accepted so far. */
    count: () => (dump ? readdirSync(dir).length : counted()),
    messages(): SinkMessage[] {
      if (!dump) throw new Error('this smtp-sink keeps no messages (dump: false)')
      return readdirSync(dir).map((f) => {
        const text = readFileSync(join(dir, f), 'latin1')
        return {
          from: /^X-Mail-Args: <([^>]*)>/m.exec(text)?.[1] ?? '',
          to: [...text.matchAll(/^X-Rcpt-Args: <([^>]*)>/gm)].map((m) => m[1]),
          text,
        }
      })
    },
    async stop() {
      child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export const DNSMASQ = '/usr/sbin/dnsmasq'

/**
 * dnsmasq as the DNS server of `.test` names on 127.0.0.1 (for MAILROOM_DNS_SERVERS), answering
 * from its command line only: `records` are its options, such as
 * `--mx-host=inside.test,mx.inside.test,10` and `--host-record=mx.inside.test,127.0.0.1`. Any other
 * `.test` name does not exist, and nothing is forwarded.
 */
export async function startDnsmasq(records: string[]) {
  if (!existsSync(DNSMASQ)) throw new Error(`${DNSMASQ} is missing: run test/system/peers.sh (npm test does)`)
  const port = await freePort()
  const child = spawn(
    DNSMASQ,
    [
      '--keep-in-foreground',
      '--conf-file=/dev/null',
      '--no-resolv',
      '--no-hosts',
      '--pid-file=',
      '--log-facility=-',
      `--port=${port}`,
      '--listen-address=127.0.0.1',
      '--bind-interfaces',
      '--local=/test/',
      ...records,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr!.on('data', (d) => (stderr += d))
  // It answers over TCP as well as UDP: a TCP connection says it is ready.
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`dnsmasq exited: ${stderr}`)
    return canConnect(port)
  })
  return { server: `127.0.0.1:${port}`, stop: () => void child.kill('SIGKILL') }
}

/**
 * `mailroom serve` as a child process over a data directory; resolves once it listens. Its output
 * is collected in memory, or with `logFile` written to that file (the bench: reading a log of
 * millions of lines would load its machine). `cwd` is its working directory (the bench's profile:
 * where V8 writes what it is told to).
 */
export async function startMailroom(
  env: Record<string, string>,
  options: { logFile?: string; cwd?: string } = {},
): Promise<{ child: ChildProcess; httpPort: number; smtpPort: number; output: () => string }> {
  const log = options.logFile === undefined ? 'pipe' : openSync(options.logFile, 'w')
  const child = spawn(process.execPath, [BIN, 'serve'], {
    cwd: options.cwd,
    env: {
      ...process.env,
      MAILROOM_HTTP_PORT: '0',
      MAILROOM_SMTP_PORT: '0',
      MAILROOM_SMTPS_PORT: '0',
      MAILROOM_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', log, log],
  })
  let out = ''
  child.stdout?.on('data', (d) => (out += d))
  child.stderr?.on('data', (d) => (out += d))
  if (typeof log === 'number') closeSync(log)
  const output = () => (options.logFile === undefined ? out : readFileSync(options.logFile, 'utf8'))
  const ports = await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`mailroom serve exited: ${output()}`)
    const m = /"port":(\d+),.*"smtpPort":(\d+).*HTTP and SMTP listening/.exec(output())
    return m ? { httpPort: Number(m[1]), smtpPort: Number(m[2]) } : undefined
  }).catch((err: Error) => {
    // A server that did not start in time is stopped, so that it does not outlive the test.
    child.kill('SIGKILL')
    throw err
  })
  return { child, ...ports, output }
}

/** Asks `check` every `everyMs` until it answers; the bench asks more often where the wait is part of what it times. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket()
    s.once('connect', () => (s.destroy(), resolve(true)))
    s.once('error', () => resolve(false))
    s.connect(port, '127.0.0.1')
  })
}
