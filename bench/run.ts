import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { dkimVerify } from 'mailauth/lib/dkim/verify.js'
import SMTPConnection from 'nodemailer/lib/smtp-connection'
import { addDomainKey } from '../cli/domains.js'
import { createTxidGenerator } from '../relay/txid.js'
import { openDataDir } from '../storage/sqlite/index.js'
import { resolverOf, startSenderDns } from '../test/relay/inbound-support.js'
import { createTestDatabase } from '../test/storage/postgres.js'
import { runHostileLoad } from '../test/system/hostile.js'
import { freePort, startMailroom, startSmtpSink, waitFor } from '../test/system/peers.js'
import { measureCliStart } from './cli-start.js'
import {
  addMailbox,
  largeMessage,
  loadMessage,
  MAILBOX,
  mailboxOf,
  maildirCount,
  RECEIVING_DOMAIN,
  SENDER,
} from './inbound.js'
import { machineTimes, perfThreads, profileFiles, report, threadTimes } from './profile.js'
import { seedLog } from './seed.js'

// npm run bench: the running product measured the way users load it. Every figure is judged only
// as a ratio to a baseline measured in the same run. Loopback only; cleans up after itself.

interface Row {
  n: number
  figure: string
  value: number
  unit: string
  baseline: string
  baselineValue: number
  ratio: number
  bar: string
  met: boolean
}

const rows: Row[] = []
const cleanup: (() => unknown)[] = []
/**
 * Everything the run writes goes under one directory of its own, the sinks' directories too (they
 * are made in the temporary directory, which is this one from here on): removing it at the end
 * leaves nothing behind, however far the run got.
 */
const ROOT = mkdtempSync(join(tmpdir(), 'mailroom-bench-'))
// Postfix and smtp-sink drop privileges, and must still reach their directories in it.
chmodSync(ROOT, 0o755)
process.env.TMPDIR = ROOT
const HERE = fileURLToPath(new URL('.', import.meta.url))
const AUTOCANNON = fileURLToPath(new URL('../../node_modules/autocannon/autocannon.js', import.meta.url))
/** Seconds of each autocannon leg of #1 and #2, and how many rounds of them. */
const DURATION = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
/** A run ends on its own within this time, finished or not (a whole run takes about 9 minutes on 2 cores, more when busy). */
const DEADLINE_SECONDS = Number(process.env.BENCH_DEADLINE_SECONDS ?? 1200)
/** Rounds of #9's calls, each kind once a round. */
const CLI_ROUNDS = Number(process.env.BENCH_CLI_ROUNDS ?? 15)

/** Registers `stop` to run when the run ends, and returns it to run sooner: either way it runs once. */
function stopAtEnd(stop: () => unknown): () => Promise<unknown> {
  let stopped: Promise<unknown> | undefined
  const once = () => (stopped ??= Promise.resolve().then(stop))
  cleanup.push(once)
  return once
}

function record(r: Omit<Row, 'ratio' | 'met'>, better: 'higher' | 'lower', bar: number) {
  const ratio = r.value / r.baselineValue
  rows.push({ ...r, ratio, met: better === 'higher' ? ratio >= bar : ratio <= bar })
  console.error(
    `#${r.n} ${r.figure}: ${r.value.toFixed(1)} ${r.unit} vs ${r.baselineValue.toFixed(1)} → ${ratio.toFixed(2)} (${r.bar})`,
  )
}

/**
 * autocannon in its own process: 2xx responses, and their rate per second. It runs for DURATION
 * seconds, or with `amount` until it has made that many requests.
 */
function autocannon(
  url: string,
  options: { method?: string; body?: string; headers?: Record<string, string>; connections?: number; amount?: number },
): Promise<{ count: number; rate: number }> {
  // autocannon refuses more connections than requests (saying so on stderr, and exiting 0).
  const connections = Math.min(options.connections ?? 32, options.amount ?? Number.POSITIVE_INFINITY)
  const args = [
    AUTOCANNON,
    '--json',
    '-c',
    String(connections),
    ...(options.amount === undefined ? ['-d', String(DURATION)] : ['-a', String(options.amount)]),
    '-m',
    options.method ?? 'GET',
  ]
  for (const [k, v] of Object.entries(options.headers ?? {})) args.push('-H', `${k}=${v}`)
  if (options.body) args.push('-b', options.body)
  args.push(url)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    // 'close', not 'exit': at 'exit' its stdout may still hold the result (Node's child_process docs).
    child.on('close', (code) => {
      // It may refuse its options with status 0 and no result: a rejection, not a throw here,
      // which would end the run without its clean-up.
      let r: Record<string, number>
      try {
        r = JSON.parse(out)
      } catch {
        return reject(new Error(`autocannon exited ${code} without a result: ${err.trim()}`))
      }
      if (code !== 0) return reject(new Error(`autocannon exited ${code}: ${err.trim()}`))
      if (r.non2xx) return reject(new Error(`${url}: ${r.non2xx} responses were not 2xx`))
      resolve({ count: r['2xx'], rate: r['2xx'] / r.duration })
    })
  })
}

const rss = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

/** The data directories of the figure being measured, removed when it ends. */
const figureDirs: string[] = []

function tempDir(name: string): string {
  const dir = mkdtempSync(join(ROOT, `${name}-`))
  figureDirs.push(dir)
  return dir
}

/**
 * `mailroom serve` over a data directory; `credentials` are those its first start printed, `cwd`
 * its working directory.
 */
async function serve(
  env: Record<string, string>,
  credentials?: { apiKey: string; user: string; password: string },
  cwd?: string,
) {
  // Its log goes to a file in its data directory, as it would in production.
  const server = await startMailroom(
    { MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false', ...env },
    { logFile: join(env.MAILROOM_DATA_DIR, 'serve.log'), cwd },
  )
  cleanup.push(() => server.child.kill('SIGKILL'))
  const banner = credentials
    ? `API key (shown only now): ${credentials.apiKey}\nSMTP username: ${credentials.user}\nSMTP password: ${credentials.password}`
    : await waitFor(async () => /Try it/.test(server.output()) && server.output())
  return {
    ...server,
    apiKey: /API key \(shown only now\): (\S+)/.exec(banner)![1],
    user: /SMTP username: +(\S+)/.exec(banner)![1],
    password: /SMTP password: +(\S+)/.exec(banner)![1],
    base: `http://127.0.0.1:${server.httpPort}`,
    stop: async () => {
      server.child.kill('SIGTERM')
      await new Promise((r) => server.child.once('exit', r))
    },
  }
}

/**
 * #1 and #2: HTTP sends against ping, MCP sends against HTTP sends. The machine's speed drifts,
 * so the three are measured in alternation, round after round, and each ratio is taken over the
 * sums. Each round starts once the sink has every message sent so far: no leg runs while the
 * backlog of an earlier one is still being delivered.
 */
async function httpFigures() {
  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  const s = await serve({ MAILROOM_DATA_DIR: tempDir('http'), MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
  const json = { 'Content-Type': 'application/json', 'X-API-KEY': s.apiKey }
  const mail = { from: 'bench@bench.example', to: 'sink@bench.example', subject: 'bench', body: 'hello' }
  const mcpBody = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'sendMail', arguments: mail },
  })
  const mcpHeaders = { ...json, Accept: 'application/json, text/event-stream' }
  const probe = await (await fetch(`${s.base}/mcp`, { method: 'POST', headers: mcpHeaders, body: mcpBody })).json()
  if (probe.result?.structuredContent?.status !== 'ok') throw new Error(`MCP sendMail failed: ${JSON.stringify(probe)}`)
  let sent = 1
  const drained = () => waitFor(async () => sink.count() >= sent, 300_000)
  const totals = { ping: 0, send: 0, mcp: 0 }
  // Round 0 warms the server up (its JIT compiles the hot paths) and is not counted.
  for (let round = 0; round <= ROUNDS; round++) {
    await drained()
    const ping = await autocannon(`${s.base}/ping`, {})
    const send = await autocannon(`${s.base}/mail/send`, { method: 'POST', headers: json, body: JSON.stringify(mail) })
    sent += send.count
    await drained()
    const mcp = await autocannon(`${s.base}/mcp`, { method: 'POST', headers: mcpHeaders, body: mcpBody })
    sent += mcp.count
    console.error(
      `#1/#2 round ${round}: ping ${ping.rate.toFixed(0)}, send ${send.rate.toFixed(0)} (${(send.rate / ping.rate).toFixed(2)}), MCP ${mcp.rate.toFixed(0)} (${(mcp.rate / send.rate).toFixed(2)}) per second${round === 0 ? ' (warm-up, not counted)' : ''}`,
    )
    if (round === 0) continue
    totals.ping += ping.rate
    totals.send += send.rate
    totals.mcp += mcp.rate
  }
  const mean = (v: number) => v / ROUNDS
  record(
    {
      n: 1,
      figure: 'POST /mail/send accepted (32 connections)',
      value: mean(totals.send),
      unit: 'req/s',
      baseline: 'GET /ping',
      baselineValue: mean(totals.ping),
      bar: '≥ 0.5',
    },
    'higher',
    0.5,
  )
  record(
    {
      n: 2,
      figure: 'sendMail over MCP Streamable HTTP',
      value: mean(totals.mcp),
      unit: 'req/s',
      baseline: '#1',
      baselineValue: mean(totals.send),
      bar: '≥ 0.8',
    },
    'higher',
    0.8,
  )
  await s.stop()
  await stopSink()
}

/**
 * #7: REST sends on one node over PostgreSQL against the same over SQLite; then two nodes on the
 * one database, 16 connections each, against that one node with 32. Legs alternate round after
 * round, as in #1; the sink has every message before each leg starts.
 */
async function postgresFigures() {
  const db = await createTestDatabase()
  const dropDb = stopAtEnd(() => db.drop())
  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  const smarthost = { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` }
  const onSqlite = await serve({ MAILROOM_DATA_DIR: tempDir('pg-sqlite'), ...smarthost })
  const shared = {
    ...smarthost,
    MAILROOM_DATABASE_URL: db.url,
    MAILROOM_SECRET_KEY: randomBytes(32).toString('base64'),
  }
  const a = await serve({ ...shared, MAILROOM_DATA_DIR: tempDir('pg-a'), MAILROOM_NODE_NAME: 'bench-a' })
  const b = await serve({ ...shared, MAILROOM_DATA_DIR: tempDir('pg-b'), MAILROOM_NODE_NAME: 'bench-b' }, a)
  const mail = JSON.stringify({
    from: 'bench@bench.example',
    to: 'sink@bench.example',
    subject: 'bench',
    body: 'hello',
  })
  const send = (s: typeof a, connections = 32) =>
    autocannon(`${s.base}/mail/send`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-KEY': s.apiKey },
      body: mail,
      connections,
    })
  let sent = 0
  const drained = () => waitFor(async () => sink.count() >= sent, 300_000)
  const totals = { sqlite: 0, one: 0, two: 0 }
  for (let round = 0; round <= ROUNDS; round++) {
    await drained()
    const lite = await send(onSqlite)
    sent += lite.count
    await drained()
    const one = await send(a)
    sent += one.count
    await drained()
    const both = await Promise.all([send(a, 16), send(b, 16)])
    sent += both[0].count + both[1].count
    const two = both[0].rate + both[1].rate
    console.error(
      `#7 round ${round}: SQLite ${lite.rate.toFixed(0)}, PostgreSQL ${one.rate.toFixed(0)} (${(one.rate / lite.rate).toFixed(2)}), two nodes ${two.toFixed(0)} (${(two / one.rate).toFixed(2)}) per second${round === 0 ? ' (warm-up, not counted)' : ''}`,
    )
    if (round === 0) continue
    totals.sqlite += lite.rate
    totals.one += one.rate
    totals.two += two
  }
  await drained()
  const mean = (v: number) => v / ROUNDS
  record(
    {
      n: 7,
      figure: 'POST /mail/send on PostgreSQL, one node',
      value: mean(totals.one),
      unit: 'req/s',
      baseline: 'the same on SQLite',
      baselineValue: mean(totals.sqlite),
      bar: '≥ 0.5',
    },
    'higher',
    0.5,
  )
  record(
    {
      n: 7,
      figure: 'POST /mail/send on PostgreSQL, two nodes',
      value: mean(totals.two),
      unit: 'req/s',
      baseline: 'one node',
      baselineValue: mean(totals.one),
      bar: '—',
    },
    'higher',
    0,
  )
  for (const s of [onSqlite, a, b]) await s.stop()
  await stopSink()
  await dropDb()
}

/** smtp-load.ts in two processes; `options` are its own (`--from=`, `--to=`, `--message=`). */
function smtpLoad(
  port: number,
  sessions: number,
  messages: number,
  auth?: { user: string; password: string },
  options: string[] = [],
): Promise<number> {
  // Two client processes share the sessions.
  const procs = [0, 1].map(
    (i) =>
      new Promise<number>((resolve, reject) => {
        const args = [
          join(HERE, 'smtp-load.js'),
          '127.0.0.1',
          String(port),
          String(sessions / 2),
          String(Math.floor(messages / 2) + (i === 0 ? messages % 2 : 0)),
        ]
        if (auth) args.push(auth.user, auth.password)
        args.push(...options)
        const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
        let out = ''
        child.stdout.on('data', (d) => (out += d))
        // 'close', not 'exit': at 'exit' its stdout may still hold the result (Node's child_process docs).
        child.on('close', (code) => {
          if (code !== 0) return reject(new Error(`load client exited ${code}`))
          try {
            resolve(JSON.parse(out).ms)
          } catch {
            reject(new Error(`load client exited 0 without a result: ${JSON.stringify(out.slice(0, 200))}`))
          }
        })
      }),
  )
  return Promise.all(procs).then((ms) => Math.max(...ms))
}

/** A REST send of 4 KB from bench.example, as large as smtp-load's messages (from load@bench.example). */
const MAIL_4KB = {
  from: 'bench@bench.example',
  to: 'sink@bench.example',
  subject: 'bench',
  body: `${'x'.repeat(76)}\n`.repeat(50),
}

/**
 * #6: what DKIM signing costs. One server takes REST sends and SMTP relaying of 4 KB messages,
 * alternately with and without a sending domain for their From (registered and removed through
 * the store between legs, as `mailroom domain add` does while a server runs); each ratio is signed
 * over unsigned, over the sums of the rounds after a warm-up round.
 */
async function dkimFigures() {
  const perLeg = Math.ceil(Number(process.env.BENCH_MESSAGES ?? 10_000) / 4)
  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  const dir = tempDir('dkim')
  const s = await serve({
    MAILROOM_DATA_DIR: dir,
    MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    MAILROOM_DOMAIN_CONCURRENCY: '16',
  })
  const admin = openDataDir(dir)
  const deps = { store: admin, config: { nodeName: 'bench.example' }, clock: Date.now }
  const json = { 'Content-Type': 'application/json', 'X-API-KEY': s.apiKey }
  let sent = 0
  const drained = () => waitFor(async () => sink.count() >= sent, 600_000)
  const leg = async () => {
    await drained()
    const rest = await autocannon(`${s.base}/mail/send`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify(MAIL_4KB),
    })
    sent += rest.count
    await drained()
    const started = performance.now()
    await smtpLoad(s.smtpPort, 16, perLeg, { user: s.user, password: s.password })
    sent += perLeg
    await drained()
    return { rest: rest.rate, smtp: (perLeg / (performance.now() - started)) * 1000 }
  }
  const totals = { rest: [0, 0], smtp: [0, 0] }
  for (let round = 0; round <= ROUNDS; round++) {
    // Which goes first alternates, so that the machine's drift lands on both.
    for (const signed of round % 2 ? [true, false] : [false, true]) {
      await admin.domains.remove('bench.example')
      if (signed) await addDomainKey(deps, { accountId: 1, domain: 'bench.example', algorithm: 'rsa' })
      const r = await leg()
      console.error(
        `#6 round ${round} ${signed ? 'signed' : 'unsigned'}: send ${r.rest.toFixed(0)}/s, relay ${r.smtp.toFixed(0)} msg/s${round === 0 ? ' (warm-up, not counted)' : ''}`,
      )
      if (round === 0) continue
      totals.rest[Number(signed)] += r.rest
      totals.smtp[Number(signed)] += r.smtp
    }
  }
  // The SMTP row's bar is #11's signed over unsigned (issue #39), without TLS here.
  for (const [key, figure, unit, bar] of [
    ['rest', 'POST /mail/send of 4 KB, DKIM-signed (RSA 2048)', 'req/s', 0.7],
    ['smtp', `SMTP relay of 4 KB, DKIM-signed (RSA 2048), ${perLeg} per leg`, 'msg/s', 0.8],
  ] as const) {
    record(
      {
        n: 6,
        figure,
        value: totals[key][1] / ROUNDS,
        unit,
        baseline: 'the same, unsigned',
        baselineValue: totals[key][0] / ROUNDS,
        bar: `≥ ${bar}`,
      },
      'higher',
      bar,
    )
  }
  await admin.close()
  await s.stop()
  await stopSink()
}

/** #3: 10,000 messages of 4 KB over 16 sessions through mailroom to smtp-sink. */
async function relayFigure() {
  const TOTAL = Number(process.env.BENCH_MESSAGES ?? 10_000)
  const direct = await startSmtpSink([], { dump: false })
  const stopDirect = stopAtEnd(() => direct.stop())
  const directMs = await smtpLoad(direct.port, 16, TOTAL)
  await stopDirect()
  console.error(`#3 load client straight to smtp-sink: ${((TOTAL / directMs) * 1000).toFixed(0)} msg/s`)

  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  const s = await serve({
    MAILROOM_DATA_DIR: tempDir('relay'),
    MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    MAILROOM_DOMAIN_CONCURRENCY: '16',
  })
  const started = performance.now()
  await smtpLoad(s.smtpPort, 16, TOTAL, { user: s.user, password: s.password })
  await waitFor(async () => sink.count() >= TOTAL, 600_000)
  const mailroomRate = (TOTAL / (performance.now() - started)) * 1000
  await s.stop()
  await stopSink()

  // The same load through Postfix, relaying to a sink of its own. Postfix takes it from loopback
  // without AUTH, which only favours Postfix.
  const postfixSink = await startSmtpSink([], { dump: false })
  const stopPostfixSink = stopAtEnd(() => postfixSink.stop())
  const postfixDir = tempDir('postfix')
  const postfixPort = await freePort()
  // Its stop is registered first: a start that fails halfway has named the instance in the
  // system's Postfix configuration already, and the stop removes that name.
  const stopPostfix = stopAtEnd(() =>
    execFileSync('bash', [join(HERE, '../../bench/postfix.sh'), 'stop', postfixDir], { stdio: 'inherit' }),
  )
  execFileSync(
    'bash',
    [join(HERE, '../../bench/postfix.sh'), 'start', postfixDir, String(postfixPort), String(postfixSink.port)],
    { stdio: 'inherit' },
  )
  await waitFor(async () => {
    try {
      await smtpLoad(postfixPort, 2, 2)
      return true
    } catch {
      return false
    }
  })
  await waitFor(async () => postfixSink.count() >= 2)
  const postfixStarted = performance.now()
  await smtpLoad(postfixPort, 16, TOTAL)
  await waitFor(async () => postfixSink.count() >= TOTAL + 2, 600_000)
  const postfixRate = (TOTAL / (performance.now() - postfixStarted)) * 1000
  // Its processes, idle or not, are no part of the figures after this one.
  await stopPostfix()
  await stopPostfixSink()
  record(
    {
      n: 3,
      figure: `SMTP relay end to end, ${TOTAL} × 4 KB, 16 sessions`,
      value: mailroomRate,
      unit: 'msg/s',
      baseline: 'Postfix, same load and sink',
      baselineValue: postfixRate,
      bar: '≥ 1.0',
    },
    'higher',
    1,
  )
  rows.push({
    n: 3,
    figure: 'load client straight to smtp-sink (for scale)',
    value: (TOTAL / directMs) * 1000,
    unit: 'msg/s',
    baseline: '—',
    baselineValue: NaN,
    ratio: NaN,
    bar: '—',
    met: true,
  })
}

/**
 * #4: GET /mail/log p95 per filter with 1,000,000 rows against the same with 10,000. Both servers
 * run at once and take each query's requests in turns, so that the machine's drift lands on both.
 */
async function logFigures() {
  const big = Number(process.env.BENCH_LOG_ROWS ?? 1_000_000)
  const REQUESTS = 60
  const start = async (rowCount: number) => {
    const dir = tempDir(`log${rowCount}`)
    // The first start creates the account and order 1; the rows are seeded while it is stopped.
    const first = await serve({ MAILROOM_DATA_DIR: dir })
    await first.stop()
    const t0 = performance.now()
    const values = await seedLog(dir, rowCount, 1)
    console.error(`#4 seeded ${rowCount} log rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    return { server: await serve({ MAILROOM_DATA_DIR: dir }, first), values }
  }
  const seeded = [await start(10_000), await start(big)]
  const now = Math.floor(Date.now() / 1000)
  // The same queries of both; a transaction id and a Message-ID are each log's middle message's.
  const queriesOf = (values: Record<string, string>): Record<string, string> => ({
    none: '',
    from: `from=${values.from}`,
    to: `to=${values.to}`,
    origin: `origin=${values.origin}`,
    subject: `subject=${encodeURIComponent(values.subject)}`,
    mailid: `mailid=${values.mailid}`,
    messageId: `messageId=${encodeURIComponent(values.messageId)}`,
    replyto: `replyto=${values.from}`,
    headerfrom: `headerfrom=${values.from}`,
    mx: `mx=${values.mx}`,
    delivered: 'delivered=0',
    'startDate/endDate': `startDate=${now - 86_400}&endDate=${now}`,
    'groupby=message': 'groupby=message',
    'groupby=message, mx': `groupby=message&mx=${values.mx}`,
  })
  const [small, large] = seeded.map(({ server, values }) => ({ server, queries: queriesOf(values) }))
  const timed = async (s: typeof small, name: string) => {
    const t = performance.now()
    const res = await fetch(`${s.server.base}/mail/log?${s.queries[name]}`, {
      headers: { 'X-API-KEY': s.server.apiKey },
    })
    if (res.status !== 200) throw new Error(`${name}: ${res.status} ${await res.text()}`)
    await res.arrayBuffer()
    return performance.now() - t
  }
  const p95 = (times: number[]) => times.sort((a, b) => a - b)[Math.ceil(times.length * 0.95) - 1]
  for (const name of Object.keys(large.queries)) {
    const times = { small: [] as number[], large: [] as number[] }
    for (let i = 0; i < REQUESTS; i++) {
      times.small.push(await timed(small, name))
      times.large.push(await timed(large, name))
    }
    record(
      {
        n: 4,
        figure: `GET /mail/log p95, ${name}, ${big.toLocaleString('en')} rows`,
        value: p95(times.large),
        unit: 'ms',
        baseline: '10,000 rows',
        baselineValue: p95(times.small),
        bar: '≤ 3×',
      },
      'lower',
      3,
    )
  }
  await Promise.all([small.server.stop(), large.server.stop()])
}

/** #5: peak RSS with 10,000 queued messages while one 25 MB message is submitted. */
async function memoryFigure() {
  const dir = tempDir('rss')
  const first = await serve({ MAILROOM_DATA_DIR: dir })
  await first.stop()
  // 10,000 messages waiting: queued for a destination that is down (nothing listens on port 9).
  const store = openDataDir(dir)
  const raw = Buffer.alloc(4096, 'x')
  const newTxid = createTxidGenerator()
  for (let i = 0; i < 10_000; i++) {
    await store.mail.enqueue({
      txid: newTxid(),
      accountId: 1,
      orderId: 1,
      envFrom: 'bench@bench.example',
      recipients: ['sink@bench.example'],
      headerFrom: null,
      replyTo: null,
      subject: 'queued',
      messageId: null,
      origin: '127.0.0.1',
      transtype: 'HTTP',
      interface: 'api',
      sendingZone: 'default',
      raw: [raw],
      time: Date.now() + 3_600_000,
    })
  }
  await store.close()
  const s = await serve(
    { MAILROOM_DATA_DIR: dir, MAILROOM_SMARTHOST: '127.0.0.1:9', MAILROOM_MAX_MESSAGE_SIZE: '26mb' },
    first,
  )
  await new Promise((r) => setTimeout(r, 2000))
  const idle = rss(s.child.pid!, 'VmRSS')
  const big = Buffer.concat([
    Buffer.from('From: bench@bench.example\r\nTo: sink@bench.example\r\nSubject: big\r\n\r\n'),
    Buffer.alloc(25 * 1024 * 1024 - 100, 'y'),
    Buffer.from('\r\n'),
  ])
  const conn = new SMTPConnection({ host: '127.0.0.1', port: s.smtpPort, ignoreTLS: true })
  conn.once('error', (err) => console.error('#5 SMTP client:', err))
  await new Promise<void>((resolve) => conn.connect(() => resolve()))
  await new Promise<void>((resolve, reject) =>
    conn.login({ user: first.user, pass: first.password }, (err) => (err ? reject(err) : resolve())),
  )
  await new Promise<void>((resolve, reject) =>
    conn.send({ from: 'bench@bench.example', to: ['sink@bench.example'], size: big.length }, big, (err) =>
      err ? reject(err) : resolve(),
    ),
  )
  conn.quit()
  const peak = rss(s.child.pid!, 'VmHWM')
  await s.stop()
  const growthMb = (peak - idle) / 1024 / 1024
  const largestMb = big.length / 1024 / 1024
  rows.push({
    n: 5,
    figure: 'peak RSS growth: 10,000 queued + one 25 MB message',
    value: growthMb,
    unit: 'MB',
    baseline: `idle RSS ${(idle / 1024 / 1024).toFixed(0)} MB; largest message ${largestMb.toFixed(0)} MB`,
    baselineValue: largestMb,
    ratio: growthMb / largestMb,
    bar: '≤ 3× the largest message',
    met: growthMb / largestMb <= 3,
  })
  console.error(`#5 idle ${(idle / 1048576).toFixed(0)} MB, peak ${(peak / 1048576).toFixed(0)} MB`)
}

/**
 * #8: the hostile load: BENCH_HOSTILE_REST clients (160) each posting a 39 MB
 * /mail/rawsend body and BENCH_HOSTILE_SMTP clients (160) each submitting a 24 MB message, all at
 * once, with the default budget (and 40 MB messages); peak RSS against the bound docs/operations.md documents.
 */
async function hostileFigure() {
  const MB = 1024 * 1024
  const restClients = Number(process.env.BENCH_HOSTILE_REST ?? 160)
  const smtpClients = Number(process.env.BENCH_HOSTILE_SMTP ?? 160)
  const dir = tempDir('hostile')
  const out = await runHostileLoad(dir, {
    rest: { clients: restClients, bytes: 39 * MB },
    smtp: { clients: smtpClients, bytes: 24 * MB },
    // The defaults, but a 39 MB body must be a message the server may take (else 413 once read).
    env: { MAILROOM_MAX_MESSAGE_SIZE: '40mb' },
    logFile: join(dir, 'serve.log'),
    deliveryTimeoutMs: 600_000,
  })
  const load = `${restClients} × 39 MB REST + ${smtpClients} × 24 MB SMTP`
  const boundMb = 1536
  const peakMb = out.peakRss / MB
  const once = out.acknowledged.filter((id) => out.sunk.get(id) === 1).length
  rows.push(
    {
      n: 8,
      figure: `peak RSS, ${load} at once`,
      value: peakMb,
      unit: 'MB',
      baseline: 'the documented bound (docs/operations.md#memory)',
      baselineValue: boundMb,
      ratio: peakMb / boundMb,
      bar: '≤ 1.0, server up',
      met: out.alive && peakMb <= boundMb,
    },
    {
      n: 8,
      figure: `/healthz worst latency (${out.healthz.samples} samples, ${out.healthz.late} over 1 s)`,
      value: out.healthz.worstMs,
      unit: 'ms',
      baseline: '1 s',
      baselineValue: 1000,
      ratio: out.healthz.worstMs / 1000,
      bar: '< 1.0',
      met: out.healthz.late === 0,
    },
    {
      n: 8,
      figure: `acknowledged messages at the sink exactly once; answers: REST ${JSON.stringify(out.rest)}, SMTP ${JSON.stringify(out.smtp)}`,
      value: once,
      unit: 'messages',
      baseline: 'acknowledged',
      baselineValue: out.acknowledged.length,
      ratio: once / out.acknowledged.length,
      bar: '= 1.0',
      met: once === out.acknowledged.length && out.sunk.size === out.acknowledged.length,
    },
  )
  console.error(
    `#8 ${load}: ${out.seconds.toFixed(0)} s, idle ${(out.idleRss / MB).toFixed(0)} MB, peak ${peakMb.toFixed(0)} MB, alive ${out.alive}, REST ${JSON.stringify(out.rest)}, SMTP ${JSON.stringify(out.smtp)}, /healthz worst ${out.healthz.worstMs.toFixed(0)} ms (${out.healthz.late} of ${out.healthz.samples} over 1 s), ${once} of ${out.acknowledged.length} acknowledged at the sink once`,
  )
}

/**
 * #10: the MX door's acceptance rate, BENCH_MESSAGES signed 4 KB messages over 16 connections
 * with SPF, DKIM and DMARC checked against a dnsmasq on loopback, against Postfix as the MX of the
 * same domain delivering the same load into a Maildir, in BENCH_ROUNDS alternating legs each; then
 * the door's peak RSS while it receives one 25 MB message (BENCH_INBOUND_MB), against its idle RSS.
 */
async function inboundFigures() {
  const TOTAL = Number(process.env.BENCH_MESSAGES ?? 10_000)
  const MB = 1024 * 1024
  const dns = await startSenderDns()
  stopAtEnd(() => dns.stop())
  const messageFile = join(tempDir('inbound-message'), 'load.eml')
  writeFileSync(messageFile, await loadMessage(4096, dns.signed))
  const load = (port: number, sessions: number, messages: number) =>
    smtpLoad(port, sessions, messages, undefined, [
      `--from=${SENDER}`,
      `--to=${MAILBOX.address}`,
      `--message=${messageFile}`,
    ])

  // Postfix as the MX of the same domain, its virtual(8) delivering into a Maildir, running beside
  // mailroom. It checks neither SPF nor DKIM, which only favours Postfix. Started first: a start
  // that fails ends the run before mailroom is set up.
  const postfixDir = tempDir('postfix-mx')
  const postfixPort = await freePort()
  const postfixSh = join(HERE, '../../bench/postfix.sh')
  // Registered first, as in #3: a start that fails halfway is undone too.
  const stopPostfix = stopAtEnd(() => execFileSync('bash', [postfixSh, 'stop', postfixDir], { stdio: 'inherit' }))
  execFileSync('bash', [postfixSh, 'virtual', postfixDir, String(postfixPort), RECEIVING_DOMAIN, MAILBOX.local], {
    stdio: 'inherit',
  })
  await waitFor(async () => {
    try {
      await load(postfixPort, 2, 2)
      return true
    } catch {
      return false
    }
  })
  let inMaildir = 2
  await waitFor(async () => maildirCount(postfixDir) >= inMaildir)

  const dir = tempDir('inbound')
  const env = {
    MAILROOM_DATA_DIR: dir,
    MAILROOM_MX_LISTEN_PORT: String(await freePort()),
    MAILROOM_MX_HOSTNAME: 'mx.inbox.test',
    MAILROOM_DNS_SERVERS: dns.server,
    MAILROOM_MAX_MESSAGE_SIZE: '26mb',
  }
  const mxPort = Number(env.MAILROOM_MX_LISTEN_PORT)
  const first = await serve(env)
  await first.stop()
  await addMailbox(dir)
  let s = await serve(env, first)
  // Two messages first: the door answers, and its checks' code is loaded.
  await load(mxPort, 2, 2)

  // The legs alternate, which goes first changing each round, so that the machine's drift lands
  // on both; each rate is over the sums of the legs.
  const ms = { mailroom: 0, postfix: 0, postfixAccepted: 0 }
  for (let round = 0; round < ROUNDS; round++) {
    const messages = Math.floor(TOTAL / ROUNDS) + (round < TOTAL % ROUNDS ? 1 : 0)
    for (const side of round % 2 ? (['postfix', 'mailroom'] as const) : (['mailroom', 'postfix'] as const)) {
      const started = performance.now()
      if (side === 'mailroom') {
        await load(mxPort, 16, messages)
        ms.mailroom += performance.now() - started
        continue
      }
      await load(postfixPort, 16, messages)
      ms.postfixAccepted += performance.now() - started
      inMaildir += messages
      await waitFor(async () => maildirCount(postfixDir) >= inMaildir, 600_000)
      ms.postfix += performance.now() - started
    }
    console.error(`#10 round ${round}: ${messages} messages each`)
  }
  const [mailroomRate, postfixRate, postfixAccepted] = [ms.mailroom, ms.postfix, ms.postfixAccepted].map(
    (t) => (TOTAL / t) * 1000,
  )
  await stopPostfix()
  await s.stop()
  // Every acknowledged message is in the inbox, and the checks did run and pass: else the figure
  // would measure something else.
  const box = await mailboxOf(dir)
  if (box.count !== TOTAL + 2 || box.spf !== 'pass' || box.dkim !== 'pass')
    throw new Error(`#10: the inbox holds ${box.count} of ${TOTAL + 2} messages, SPF ${box.spf}, DKIM ${box.dkim}`)
  record(
    {
      n: 10,
      figure: `MX door, ${TOTAL} × 4 KB, 16 connections, SPF, DKIM and DMARC checked, each in its inbox at 250`,
      value: mailroomRate,
      unit: 'msg/s',
      baseline: "Postfix as the domain's MX, until virtual(8) has each in the Maildir",
      baselineValue: postfixRate,
      bar: '≥ 1.0',
    },
    'higher',
    1,
  )
  rows.push({
    n: 10,
    figure: 'Postfix, until its last 250 (queued, not yet in the Maildir; for scale)',
    value: postfixAccepted,
    unit: 'msg/s',
    baseline: '—',
    baselineValue: NaN,
    ratio: NaN,
    bar: '—',
    met: true,
  })

  // Memory: a fresh start over the same data directory, idle, then one large signed message.
  s = await serve(env, first)
  await new Promise((r) => setTimeout(r, 2000))
  const idle = rss(s.child.pid!, 'VmRSS')
  const big = Buffer.from(await largeMessage(Number(process.env.BENCH_INBOUND_MB ?? 25) * MB, dns.signed), 'latin1')
  const conn = new SMTPConnection({ host: '127.0.0.1', port: mxPort, ignoreTLS: true, name: 'mail.sender.test' })
  conn.once('error', (err) => console.error('#10 SMTP client:', err))
  await new Promise<void>((resolve) => conn.connect(() => resolve()))
  await new Promise<void>((resolve, reject) =>
    conn.send({ from: SENDER, to: [MAILBOX.address], size: big.length }, big, (err) => (err ? reject(err) : resolve())),
  )
  conn.quit()
  const peak = rss(s.child.pid!, 'VmHWM')
  await s.stop()
  const growthMb = (peak - idle) / MB
  const sizeMb = big.length / MB
  rows.push({
    n: 10,
    figure: `peak RSS growth: one ${sizeMb.toFixed(0)} MB message (an attachment) through the MX door`,
    value: growthMb,
    unit: 'MB',
    baseline: `idle RSS ${(idle / MB).toFixed(0)} MB; the message ${sizeMb.toFixed(0)} MB`,
    baselineValue: sizeMb,
    ratio: growthMb / sizeMb,
    bar: '≤ 3× the message',
    met: growthMb / sizeMb <= 3,
  })
  console.error(`#10 idle ${(idle / MB).toFixed(0)} MB, peak ${(peak / MB).toFixed(0)} MB`)
}

/**
 * #11: the relays as a user would compare them (issue #39). One `mailroom serve` (STARTTLS
 * offered, AUTH required, and only after STARTTLS) and two Postfix instances (`bench/postfix.sh
 * start --tls`, and the same signing through OpenDKIM as a milter) all relay to one smtp-sink.
 * Each leg is BENCH_MESSAGES/4 messages of 4 KB over 16 sessions of #3's client, timed until the
 * sink has them all: Postfix with STARTTLS, mailroom with STARTTLS and AUTH, Postfix and OpenDKIM
 * with STARTTLS, mailroom the same with a sending domain for bench.example (registered and removed
 * around its leg, as in #6), Postfix without TLS, and as many REST sends (autocannon, 16
 * connections). The legs alternate by round as in #6, round 0 warming up; each rate is over the
 * sums of its legs. Before the load, messages from each signer are captured and their signatures
 * verified by mailauth against the published keys: the run fails unless both signers' do.
 */
async function tlsFigures() {
  const perLeg = Math.ceil(Number(process.env.BENCH_MESSAGES ?? 10_000) / 4)
  const postfixSh = join(HERE, '../../bench/postfix.sh')
  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  // The messages signed before the load go to a sink that keeps them.
  const capture = await startSmtpSink()
  const stopCapture = stopAtEnd(() => capture.stop())

  // Each Postfix instance's stop is registered before its start, as in #3.
  const postfixInstance = (name: string) => {
    const dir = tempDir(name)
    const stop = () => execFileSync('bash', [postfixSh, 'stop', dir], { stdio: 'inherit' })
    return { dir, stop, stopAtEnd: stopAtEnd(stop) }
  }
  /** Starts (again) a Postfix relay towards `sinkPort`, and waits until its smtpd takes mail over TLS. */
  const startPostfix = async (dir: string, port: number, sinkPort: number, options: string[]) => {
    execFileSync('bash', [postfixSh, 'start', dir, String(port), String(sinkPort), ...options], { stdio: 'inherit' })
    await waitFor(async () => {
      try {
        await smtpLoad(port, 2, 2, undefined, ['--starttls'])
        return true
      } catch {
        return false
      }
    })
  }
  // Postfix offering STARTTLS: its legs with STARTTLS and without TLS.
  const plain = { ...postfixInstance('postfix-tls'), port: await freePort() }
  await startPostfix(plain.dir, plain.port, sink.port, ['--tls'])
  // Postfix offering STARTTLS and signing through OpenDKIM; it relays to the capture sink first.
  const signer = { ...postfixInstance('postfix-opendkim'), port: await freePort() }
  const signerOptions = ['--tls', '--dkim', 'bench.example', String(await freePort())]
  await startPostfix(signer.dir, signer.port, capture.port, signerOptions)

  // mailroom's first start relays to the capture sink too.
  const dir = tempDir('tls')
  const env = { MAILROOM_DATA_DIR: dir, MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'true', MAILROOM_DOMAIN_CONCURRENCY: '16' }
  const first = await serve({ ...env, MAILROOM_SMARTHOST: `127.0.0.1:${capture.port}` })
  const auth = { user: first.user, password: first.password }
  const admin = openDataDir(dir)
  const deps = { store: admin, config: { nodeName: 'bench.example' }, clock: Date.now }
  const key = await addDomainKey(deps, { accountId: 1, domain: 'bench.example', algorithm: 'rsa' })
  await smtpLoad(first.smtpPort, 2, 2, auth, ['--starttls'])
  await waitFor(async () => capture.count() >= 4)
  const resolver = resolverOf([
    key.records[0],
    { name: 'opendkim._domainkey.bench.example', value: readFileSync(join(signer.dir, 'dkim.txt'), 'utf8').trim() },
  ])
  const verdicts = await Promise.all(
    capture.messages().map(async (m) => {
      const { results } = await dkimVerify(Buffer.from(m.text, 'latin1'), { resolver })
      return results.map((r) => `${r.signingDomain}/${r.selector}: ${r.status.result}`)
    }),
  )
  // The selector of each message's passing signature of bench.example.
  const passed = verdicts.map((v) => v.map((r) => /^bench\.example\/(\S+): pass$/.exec(r)?.[1]).find(Boolean))
  if (passed.includes(undefined) || !passed.includes(key.selector) || !passed.includes('opendkim'))
    throw new Error(`#11: the signed messages did not all verify: ${JSON.stringify(verdicts)}`)
  console.error(`#11 verified by mailauth: ${verdicts.flat().join(', ')}`)
  await admin.domains.remove('bench.example')
  await first.stop()
  await stopCapture()

  // Both signers again, now towards the load's sink.
  const s = await serve({ ...env, MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` }, first)
  signer.stop()
  await startPostfix(signer.dir, signer.port, sink.port, signerOptions)
  // What the sink has so far, the readiness checks' messages, is counted out of the legs.
  await waitFor(async () => sink.count() >= 4)
  let sent = sink.count()

  const headers = { 'Content-Type': 'application/json', 'X-API-KEY': s.apiKey }
  const relay = (port: number, options: string[], as?: typeof auth) => () => smtpLoad(port, 16, perLeg, as, options)
  const legs = {
    postfixTls: relay(plain.port, ['--starttls']),
    mailroomTls: relay(s.smtpPort, ['--starttls'], auth),
    postfixDkim: relay(signer.port, ['--starttls']),
    mailroomDkim: relay(s.smtpPort, ['--starttls'], auth),
    postfix: relay(plain.port, []),
    rest: async () => {
      const r = await autocannon(`${s.base}/mail/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify(MAIL_4KB),
        connections: 16,
        amount: perLeg,
      })
      if (r.count !== perLeg) throw new Error(`#11: ${r.count} of ${perLeg} REST sends were answered 2xx`)
    },
  }
  type Leg = keyof typeof legs
  const only = process.env.BENCH_TLS_LEGS?.split(',')
  const names = (Object.keys(legs) as Leg[]).filter((n) => !only || only.includes(n))
  const ms = Object.fromEntries(names.map((n) => [n, 0])) as Record<Leg, number>
  for (let round = 0; round <= ROUNDS; round++) {
    const took: string[] = []
    for (const name of round % 2 ? [...names].reverse() : names) {
      if (name === 'mailroomDkim') await addDomainKey(deps, { accountId: 1, domain: 'bench.example', algorithm: 'rsa' })
      const started = performance.now()
      const m0 = machineTimes()
      sent += perLeg
      // The leg ends when the sink has its last message, whenever its client exits (autocannon
      // only at its next second); the sink is polled often, as that wait is part of the leg's time.
      const sunk = waitFor(async () => sink.count() >= sent, 600_000, 10).then(() => performance.now())
      sunk.catch(() => undefined)
      await legs[name]()
      const legMs = (await sunk) - started
      const m1 = machineTimes()
      if (name === 'mailroomDkim') await admin.domains.remove('bench.example')
      // The whole machine's CPU (the load's client, the sink and Postfix included), in clock ticks of 10 ms.
      const busyUs = ((m1.total - m0.total - (m1.idle - m0.idle)) * 10_000) / perLeg
      const idle = (100 * (m1.idle - m0.idle)) / (m1.total - m0.total)
      took.push(
        `${name} ${((perLeg / legMs) * 1000).toFixed(0)} (${busyUs.toFixed(0)} µs of CPU a message, ${idle.toFixed(0)}% idle)`,
      )
      if (round > 0) ms[name] += legMs
    }
    console.error(`#11 round ${round}, msg/s: ${took.join(', ')}${round === 0 ? ' (warm-up, not counted)' : ''}`)
  }
  await admin.close()
  await s.stop()
  await signer.stopAtEnd()
  await plain.stopAtEnd()
  await stopSink()

  const rate = (leg: Leg) => ((perLeg * ROUNDS) / ms[leg]) * 1000
  const signing = 'RSA 2048, relaxed/relaxed'
  for (const [figure, leg, baseline, baseLeg, bar] of [
    [
      `SMTP relay end to end, STARTTLS + AUTH, ${perLeg} × 4 KB a leg, 16 sessions`,
      'mailroomTls',
      'Postfix with STARTTLS, same load and sink',
      'postfixTls',
      3,
    ],
    [
      `the same, DKIM-signed (${signing})`,
      'mailroomDkim',
      `Postfix + OpenDKIM milter (${signing}), STARTTLS`,
      'postfixDkim',
      4,
    ],
    ['the same, DKIM-signed', 'mailroomDkim', 'the same, unsigned', 'mailroomTls', 0.8],
    [
      `POST /mail/send end to end, ${perLeg} × 4 KB a leg, 16 connections`,
      'rest',
      'Postfix without TLS, same load and sink',
      'postfix',
      3.5,
    ],
  ] as const) {
    // BENCH_TLS_LEGS (a list of the legs' names) runs only those, for a closer look at two of them.
    if (!(leg in ms && baseLeg in ms)) continue
    record(
      { n: 11, figure, value: rate(leg), unit: 'msg/s', baseline, baselineValue: rate(baseLeg), bar: `≥ ${bar}` },
      'higher',
      bar,
    )
  }
}

const heading = () =>
  `mailroom benchmark, ${cpus().length} cores, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`

/** The reports of `profile` (bench/profile.ts), one for each of its loads. */
const reports: string[] = []
const nowUs = () => Number(process.hrtime.bigint() / 1000n)

/**
 * `profile` (never part of a whole run): where a message's CPU goes, by phase and thread
 * (bench/profile.ts; the README's "Where a relayed message's time goes"). Four loads, each on a
 * server of its own under `--cpu-prof` and perf, with bench.example a sending domain (DKIM, RSA
 * 2048, registered as in #6) but for the second, all delivering to one smtp-sink: BENCH_MESSAGES
 * messages of 4 KB over 16 SMTP sessions with STARTTLS and AUTH (the relay load of #3, as a mail
 * program submitting to port 587 sends it); the same unsigned, for what signing costs each thread;
 * the same signed without TLS, for comparison; and as many REST sends of 4 KB
 * (autocannon, 32 connections). A tenth as many go first, to warm the server up. What is measured
 * runs from the start of the load until the sink has its last message: each thread's CPU from
 * /proc, and the samples both profilers took meanwhile.
 */
async function profileFigure() {
  const TOTAL = Number(process.env.BENCH_MESSAGES ?? 10_000)
  const warmUp = Math.ceil(TOTAL / 10)
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' })
  } catch {
    throw new Error(
      'profile needs perf, which samples what runs on the cores: install it (Debian: apt-get install linux-perf)',
    )
  }
  // The raw profiles, for a closer look (bench/profile.ts as a command, a browser's DevTools, perf report).
  const keep = process.env.BENCH_PROFILE_KEEP
  const sink = await startSmtpSink([], { dump: false })
  const stopSink = stopAtEnd(() => sink.stop())
  let sent = 0
  const drained = () => waitFor(async () => sink.count() >= sent, 600_000)
  type Served = Awaited<ReturnType<typeof serve>>
  const leg = async (
    name: string,
    title: string,
    load: (s: Served, messages: number) => Promise<unknown>,
    signed = true,
  ) => {
    const dir = tempDir(`profile-${name}`)
    const cpu = tempDir(`profile-${name}-cpu`)
    const s = await serve(
      {
        MAILROOM_DATA_DIR: dir,
        MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
        MAILROOM_DOMAIN_CONCURRENCY: '16',
        // Every thread, the engine's included, writes its profile into `cpu` as it ends; and the
        // JIT's code, the interpreter's included, is written for perf with its names and times
        // (jit-<pid>.dump, in the server's working directory: `cpu` too).
        NODE_OPTIONS: [
          process.env.NODE_OPTIONS,
          '--cpu-prof',
          `--cpu-prof-dir=${cpu}`,
          '--perf-prof',
          '--interpreted-frames-native-stack',
        ]
          .filter(Boolean)
          .join(' '),
      },
      undefined,
      cpu,
    )
    const pid = s.child.pid!
    const admin = openDataDir(dir)
    if (signed)
      await addDomainKey(
        { store: admin, config: { nodeName: 'bench.example' }, clock: Date.now },
        { accountId: 1, domain: 'bench.example', algorithm: 'rsa' },
      )
    await admin.close()
    await load(s, warmUp)
    sent += warmUp
    await drained()
    // perf samples every thread of the server while it is on a core, with its call stack, and
    // times them by the monotonic clock, as V8 does the JIT's code.
    const perfData = join(cpu, 'perf.data')
    const perf = spawn(
      'perf',
      ['record', '-e', 'cpu-clock', '-F', '999', '-g', '-k', 'mono', '-p', String(pid), '-o', perfData],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    )
    let perfErr = ''
    perf.stderr.on('data', (d) => (perfErr += d))
    const perfDone = new Promise((resolve) => perf.once('exit', resolve))
    await waitFor(async () => {
      if (perf.exitCode !== null) throw new Error(`perf record exited ${perf.exitCode}: ${perfErr}`)
      return existsSync(perfData) && statSync(perfData).size > 0
    })
    const before = { threads: threadTimes(pid), machine: machineTimes(), at: nowUs() }
    await load(s, TOTAL)
    sent += TOTAL
    await drained()
    const after = { threads: threadTimes(pid), machine: machineTimes(), at: nowUs() }
    perf.kill('SIGINT')
    await perfDone
    // A clean stop (SIGTERM), after which each thread has written its profile.
    await s.stop()
    const profiles = profileFiles(cpu)
    if (!profiles.some((p) => p.threadId === 0) || profiles.length < 2)
      throw new Error(
        `profile ${name}: the server wrote ${readdirSync(cpu).join(', ') || 'no profile'}; one for each thread was expected`,
      )
    const jit = join(cpu, `jit-${pid}.dump`)
    const threads = await perfThreads(perfData, jit)
    if (keep) {
      for (const p of profiles) copyFileSync(p.file, join(keep, `${name}.${basename(p.file)}`))
      for (const f of [perfData, jit]) copyFileSync(f, join(keep, `${name}.${basename(f)}`))
    }
    reports.push(
      report({
        title,
        messages: TOTAL,
        from: before.at,
        to: after.at,
        pid,
        threads: { before: before.threads, after: after.threads },
        machine: { before: before.machine, after: after.machine },
        perf: threads,
        profiles,
      }),
    )
    const seconds = (after.at - before.at) / 1e6
    const samples = [...threads.values()].reduce((n, t) => n + t.profile.samples.length, 0)
    console.error(
      `profile ${name}: ${TOTAL} messages in ${seconds.toFixed(1)} s; server ${pid}, ${profiles.length} --cpu-prof profiles, ${samples} perf samples`,
    )
  }
  const smtp = (options: string[]) => (s: Served, messages: number) =>
    smtpLoad(s.smtpPort, 16, messages, { user: s.user, password: s.password }, options)
  await leg(
    'relay',
    `Relay: ${TOTAL} × 4 KB over 16 SMTP sessions with STARTTLS and AUTH, DKIM-signed, to smtp-sink`,
    smtp(['--starttls']),
  )
  await leg(
    'relay-unsigned',
    `The same unsigned: ${TOTAL} × 4 KB over 16 SMTP sessions with STARTTLS and AUTH, no sending domain`,
    smtp(['--starttls']),
    false,
  )
  await leg('relay-plain', `The same without TLS: ${TOTAL} × 4 KB over 16 SMTP sessions with AUTH`, smtp([]))
  await leg('rest', `REST: ${TOTAL} POST /mail/send of 4 KB over 32 connections, DKIM-signed, to smtp-sink`, (s, n) =>
    autocannon(`${s.base}/mail/send`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-KEY': s.apiKey },
      body: JSON.stringify(MAIL_4KB),
      amount: n,
    }),
  )
  await stopSink()
}

function table(): string {
  const fmt = (v: number) => (Number.isNaN(v) ? '—' : v >= 100 ? v.toFixed(0) : v.toFixed(2))
  const lines = [
    heading(),
    '',
    '| # | figure | value | baseline | baseline value | ratio | bar | met |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.n} | ${r.figure} | ${fmt(r.value)} ${r.unit} | ${r.baseline} | ${fmt(r.baselineValue)} | ${fmt(r.ratio)} | ${r.bar} | ${r.bar === '—' ? '' : r.met ? 'yes' : 'no'} |`,
    ),
  ]
  return lines.join('\n')
}

/** The processes this one started, and theirs, from `/proc`. */
function descendants(): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = []
  for (let i = 0, todo = [process.pid]; i < todo.length; i++)
    for (const pid of children.get(todo[i]) ?? []) todo.push(pid), found.push(pid)
  return found
}

let cleaning: Promise<void> | undefined
/**
 * Stops what the run started, newest first, each step once, whatever fails; then whatever child
 * process is left (a server still starting when the run was interrupted, a load generator), and
 * removes the run's directory. A second caller (the run's own end, after a signal) waits for the
 * same clean-up.
 */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanup.reverse()) {
      try {
        await step()
      } catch (err) {
        console.error(err)
      }
    }
    for (const pid of descendants()) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    rmSync(ROOT, { recursive: true, force: true })
  })()
  return cleaning
}

/** #9: `mailroom --help`, `queue list` and stdio's `initialize` against the start of `node -e 0`. */
async function cliFigures() {
  const t = await measureCliStart(tempDir('cli'), CLI_ROUNDS)
  const legs = [
    ['mailroom --help', t.help, 3],
    ['mailroom queue list, on a data directory', t.queue, 10],
    ["mailroom stdio, until its answer to MCP's initialize", t.initialize, 20],
  ] as const
  for (const [figure, value, bar] of legs)
    record(
      { n: 9, figure, value, unit: 'ms', baseline: 'node -e 0', baselineValue: t.node, bar: `≤ ${bar}×` },
      'lower',
      bar,
    )
}

async function main() {
  const figures = {
    http: httpFigures,
    relay: relayFigure,
    log: logFigures,
    rss: memoryFigure,
    dkim: dkimFigures,
    postgres: postgresFigures,
    cli: cliFigures,
    inbound: inboundFigures,
    tls: tlsFigures,
    hostile: hostileFigure,
    profile: profileFigure,
  }
  const only = process.argv[2]
  if (only && !(only in figures)) {
    console.error(`no figures named ${only}: run all of them, or one of ${Object.keys(figures).join(', ')}`)
    await cleanUp()
    process.exit(2)
  }
  // Ctrl-C reaches the children too, but not the Postfix instance of #3 (a daemon), and a
  // supervisor's signal may reach this process alone: an interrupted run still stops and removes
  // everything it started or wrote.
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      console.error(`${signal}: stopping what the benchmark started`)
      void cleanUp().then(() => process.exit(code))
    })
  }
  setTimeout(() => {
    console.error(`the benchmark did not end within ${DEADLINE_SECONDS} s: stopping what it started`)
    void cleanUp().then(() => process.exit(1))
  }, DEADLINE_SECONDS * 1000).unref()
  try {
    for (const [name, figure] of Object.entries(figures)) {
      // #8 loads the machine for minutes, and the profile is no figure: each runs only when named.
      if (only ? only !== name : name === 'hostile' || name === 'profile') continue
      await figure()
      // Each figure stops what it started; its files (#1's database alone takes hundreds of MB)
      // then leave the disk, and their dirty pages the kernel's writeback, before the next.
      for (const dir of figureDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
    }
    // `profile` has no figures, only its reports.
    console.log(rows.length ? table() : [heading(), ...reports].join('\n\n'))
  } finally {
    await cleanUp()
  }
}

main().catch(async (err) => {
  console.error(err)
  await cleanUp()
  process.exit(1)
})
