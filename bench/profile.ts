import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { createInterface } from 'node:readline'

/**
 * Where a message's CPU goes (`npm run bench -- profile`). Two profilers watch the same server:
 *
 * - `perf record` samples each thread only while it is on a core (`-e cpu-clock`), through native
 *   code and the kernel as through JavaScript (`node --perf-prof` names the JIT's code, and
 *   `--interpreted-frames-native-stack` the interpreter's): its samples share out the CPU.
 * - `node --cpu-prof` writes each thread's JavaScript profile at exit. Its sampler signals the
 *   thread every millisecond of wall time, whether it runs, waits for a core or is blocked in a
 *   call: on a machine with more runnable threads than cores its samples pile up where a thread is
 *   preempted, which is where it wakes another (handing a job to the thread pool, a message to the
 *   engine, bytes to a socket whose reader waits), and in calls that block (an fsync). Beside
 *   perf's shares, its own show where the threads wait.
 *
 * Each sample's stack goes to a phase: walked from the leaf up, the first frame that a rule of
 * RULES names decides. How much CPU each thread used is read from the kernel (`/proc`); the
 * samples share it out.
 *
 * Also a command, for what a run kept (BENCH_PROFILE_KEEP):
 *   node dist/bench/profile.js FILE.cpuprofile... [FILE.perf.data --jit=jit-PID.dump]... [--top=N]
 * prints each profile's phases (shares of its busy samples, by thread for perf's) and the N
 * functions with the most samples of their own.
 */

export interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}

export interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** The phases in the order they are shown: a message's way through the relay, then the runtime's. */
export const PHASES = [
  'TLS',
  'SMTP session',
  'REST request',
  'message headers and MIME',
  'checks',
  'hand-over between threads',
  'commit',
  'DKIM: canonicalization',
  'DKIM: hashing',
  'DKIM: signing',
  'outbound session',
  'record',
  'logging',
  'metrics',
  'store, other',
  'socket I/O',
  'sockets and streams',
  'event loop and promises',
  'garbage collection',
  'JIT compiling',
  'profiling itself',
  'malloc and free',
  'native, outside JavaScript',
  'startup, loading and exit',
  'other',
  'idle',
] as const
export type Phase = (typeof PHASES)[number]

/**
 * What a frame must be: each pattern given must match. A JavaScript frame's url is its module's
 * (`file:` or `node:`); a native function's is empty in a `.cpuprofile`, and `native:` and the
 * file it is in (`native:node`, `native:[kernel.kallsyms]`) in perf's samples.
 */
interface FrameTest {
  url?: RegExp
  name?: RegExp
}

interface Rule extends FrameTest {
  phase: Phase
  /** Some frame above this one (its callers, up to the root) must pass this too. */
  under?: FrameTest
  /**
   * `weak`: names the phase only when no other rule names a frame anywhere on the stack (Node's
   * machinery, which every door and the engine go through: the caller says what it was for).
   * `fallback`: only when no weak rule does either.
   */
  tier?: 'weak' | 'fallback'
}
const TIERS = [undefined, 'weak', 'fallback'] as const

/** A module of the product (compiled, under dist/ or not), e.g. ours('relay/dkim'). */
const ours = (path: string) => new RegExp(`^file://(?!.*/node_modules/).*/${path}\\.js$`)
/** A module of one of these packages. */
const dep = (...names: string[]) => new RegExp(`/node_modules/(?:${names.join('|')})/`)
const node = (...modules: string[]) => new RegExp(`^node:(?:${modules.join('|')})$`)
const named = (...names: string[]) => new RegExp(`^(?:\\w+\\.)?(?:${names.join('|')})$`)
/** Native functions whose (demangled) names start so. */
const native = (...prefixes: string[]) => new RegExp(`^(?:${prefixes.join('|')})`)

/**
 * The rules, tried in this order at each frame. Only the code that runs under the relay load and
 * the REST load of the profile is named; what is left is "other", listed by function in the
 * report so that a rule can be added for it.
 */
export const RULES: Rule[] = [
  // V8's own entries in a `.cpuprofile`: not frames of any code.
  { phase: 'idle', name: /^\(idle\)$/, url: /^$/ },
  { phase: 'garbage collection', name: /^\(garbage collector\)$/, url: /^$/ },
  // Native code with no JavaScript under it: libuv, socket reads and TLS decryption (done before
  // the data reaches JavaScript), the deserialization of messages between threads, compilation.
  { phase: 'native, outside JavaScript', name: /^\(program\)$/, url: /^$/ },
  // Whatever runs while a module is loaded (its top-level code included) is loading; the command's
  // start (the CLI, the configuration, startServer) and the exit are counted with it. None of it
  // should be seen under load but the modules a load is the first to import.
  { phase: 'startup, loading and exit', under: { url: /^node:internal\/modules\// } },
  {
    phase: 'startup, loading and exit',
    url: /^node:internal\/(?:modules\/.+|main\/.+|bootstrap\/.+|process\/pre_execution|process\/per_thread)$/,
  },
  { phase: 'startup, loading and exit', url: ours('(?:esm-resolve|config|serve|cli/[^/]+|bin/mailroom)') },
  { phase: 'startup, loading and exit', url: dep('commander') },

  // The profilers' own work in the threads they watch: --cpu-prof's signal handler walking the
  // stack (all it calls, V8's look-ups of code included), --perf-prof's writes of new code.
  { phase: 'profiling itself', under: { name: /^v8::sampler::SignalHandler/ } },
  {
    phase: 'profiling itself',
    name: native(
      'v8::sampler::',
      'v8::internal::(?:\\w+::)?(?:Sampler|SamplingEventsProcessor|CpuSampler|TickSample|ProfilerListener|CpuProfiler|ProfilerCodeObserver|\\w*CodeEventLogger|\\w*Perf(?:Basic|Jit)Logger)',
      'node::inspector::',
    ),
  },
  // V8's own work, wherever it is triggered.
  {
    phase: 'garbage collection',
    name: native(
      'v8::internal::(?:Heap|Scavenger|ScavengerCollector|MarkCompactCollector|MinorMarkSweepCollector|ConcurrentMarking|IncrementalMarking|MarkingBarrier|Sweeper|ArrayBufferSweeper|GCTracer|EvacuationAllocator|MemoryAllocator)::',
      'v8::internal::\\w*(?:Evacuat|Marking|Sweep|Scaveng)',
      'v8::internal::heap::',
    ),
  },
  {
    phase: 'JIT compiling',
    name: native(
      'v8::internal::(?:compiler|maglev|baseline|turboshaft|interpreter)::',
      'v8::internal::(?:Compiler|Parser|PreParser|OptimizingCompileDispatcher)',
    ),
  },

  // The C library's allocator, whose callers perf cannot see (it keeps no frame pointers).
  {
    phase: 'malloc and free',
    url: /^native:libc/,
    name: native(
      '_?_?(?:int_|libc_)?(?:malloc|free|calloc|realloc)',
      'unlink_chunk',
      'malloc_consolidate',
      'sysmalloc',
      'tcache_',
    ),
  },

  // Lines logged and counts made are theirs, whatever called them (the frame nearest the leaf wins).
  {
    phase: 'logging',
    url: dep(
      'pino',
      'pino-std-serializers',
      'sonic-boom',
      'thread-stream',
      '@pinojs/[^/]+',
      'quick-format-unescaped',
      'safe-stable-stringify',
      'fast-redact',
      'atomic-sleep',
      'on-exit-leak-free',
    ),
  },
  { phase: 'logging', url: ours('logger') },
  // The thread pool's file writes: under these loads, only the log's (pino's asynchronous destination).
  { phase: 'logging', name: native('uv__fs_') },
  { phase: 'metrics', url: dep('prom-client', 'tdigest', 'bintrees') },
  { phase: 'metrics', url: ours('metrics') },
  { phase: 'metrics', url: ours('transports/metrics') },

  // DKIM (relay/dkim.ts): the bytes made CRLF, joined and put in relaxed form; the SHA-256 of the
  // body and of the signed fields; the rest is the signature (the key looked up and parsed, the
  // RSA signature made in Node's thread pool, the header field built around it).
  {
    phase: 'DKIM: canonicalization',
    url: ours('relay/dkim'),
    name: named('relaxedBody', 'relaxedHeader', 'splitMessage', 'fieldName', 'withCrlf'),
  },
  {
    phase: 'DKIM: canonicalization',
    url: ours('relay/smtp-session'),
    name: named('hasOnlyCrlf'),
    under: { url: ours('relay/dkim') },
  },
  {
    phase: 'DKIM: canonicalization',
    url: ours('storage/store'),
    name: named('joinPieces'),
    under: { url: ours('relay/dkim') },
  },
  { phase: 'DKIM: hashing', url: /^node:internal\/crypto\/hash$/, under: { url: ours('relay/dkim') } },
  { phase: 'DKIM: signing', url: ours('relay/dkim') },
  // The signature coming back from the thread pool (its callback is ours, but runs below this
  // frame), and the job itself, in the doors' thread and the pool's. The only signatures made under
  // these loads are DKIM's.
  { phase: 'DKIM: signing', url: /^node:internal\/crypto\/sig$/, name: named('ondone') },
  // OpenSSL's big-number arithmetic, often seen without its callers (its assembly keeps no frame
  // pointers): RSA private-key operations, which under these loads are DKIM's signatures.
  { phase: 'DKIM: signing', name: native('bn_', 'BN_', 'ossl_rsaz', 'rsaz_', 'RSA_', 'rsa_ossl_', 'ossl_bn_') },
  {
    phase: 'DKIM: signing',
    name: native(
      'node::crypto::(?:DeriveBitsJob|CryptoJob)<node::crypto::SignTraits>',
      'node::crypto::SignTraits',
      '(?:non-virtual thunk to )?node::crypto::DeriveBitsJob<node::crypto::SignTraits>',
    ),
  },

  // TLS: Node's TLS layer, and OpenSSL's records and ciphers (not its RSA, which is DKIM's here).
  { phase: 'TLS', url: node('_tls_wrap', 'tls', '_tls_common', 'internal/tls/.+') },
  {
    phase: 'TLS',
    name: native(
      'node::crypto::(?:TLSWrap|SecureContext)::',
      'SSL_',
      'ssl3?_',
      'ossl_(?:tls|ssl|gcm|aes)',
      'tls1?3?_',
      'aesni_',
      '_?aes_',
      '_?gcm_',
      'ChaCha20',
      'chacha20',
      'Poly1305',
      'poly1305',
      'EVP_(?:Encrypt|Decrypt|Cipher)',
      // The handshakes' elliptic curves (key exchange, the certificate's signature).
      'x25519',
      'ecp_nistz256',
      'ossl_ec',
    ),
  },
  // Bytes into and out of sockets: libuv's reads and writes and the kernel's work under them.
  {
    phase: 'socket I/O',
    name: native(
      'uv__(?:read|write|try_write|stream_io|write_callbacks)$',
      'uv_(?:try_write|write|write2)$',
      'node::(?:LibuvStreamWrap|StreamBase|StreamResource|TCPWrap|ConnectionWrap)::',
    ),
  },
  // Between the doors' thread and the engine's: a message's pieces moved (and, natively, copied or
  // serialized), outcomes answered, the engine's log lines and counts sent back.
  { phase: 'hand-over between threads', url: ours('(?:relay/engine|thread-calls)') },
  {
    phase: 'hand-over between threads',
    url: node('internal/worker', 'internal/worker/io', 'internal/per_context/messageport'),
  },
  {
    phase: 'hand-over between threads',
    name: native('node::worker::', 'v8::internal::Value(?:Des|S)erializer', 'v8::Value(?:Des|S)erializer'),
  },

  // The engine's side of accepting: the message leased and committed in a group commit (its
  // fsync shared with the messages that came meanwhile), the Message-ID index filled soon after.
  { phase: 'commit', url: ours('relay/delivery'), name: named('accept') },
  { phase: 'commit', url: ours('storage/sqlite/mail') },
  // After an attempt: its outcome, events and reports written (queue.ts's record, in a group
  // commit of its own that waits RECORD_DELAY_MS for more: the only one run from a timer).
  {
    phase: 'record',
    url: ours('storage/sqlite/group-commit'),
    under: { url: /^node:internal\/timers$/, name: named('listOnTimeout', 'processTimers') },
  },
  { phase: 'commit', url: ours('storage/sqlite/group-commit') },
  { phase: 'record', url: ours('relay/delivery'), name: named('deliverGroup', 'reportsFor') },
  { phase: 'record', url: ours('relay/(?:bounces|reports)') },
  { phase: 'outbound session', url: ours('storage/sqlite/queue'), name: named('claim', 'claimTx', 'body', 'renew') },
  { phase: 'record', url: ours('storage/sqlite/queue') },
  // The delivery worker's own scheduling, the route, and the SMTP session toward the MX (here the
  // sink).
  {
    phase: 'outbound session',
    url: ours(
      'relay/(?:delivery|destinations|mx-client|smtp-session|routes|sandbox|inbound/local|return-path|mta-sts|mx-certificate)',
    ),
  },
  { phase: 'outbound session', url: dep('nodemailer') },

  // The submission door: smtp-server's parsing and state, our handlers, the message's header read.
  { phase: 'SMTP session', url: dep('smtp-server') },
  { phase: 'SMTP session', url: ours('relay/(?:submission|smtp-door)') },
  {
    phase: 'SMTP session',
    url: ours('relay/message'),
    name: named('readHeaders', 'messageHead', 'headerEnd', 'refuseBareCr', 'kept', 'missingHeaders'),
  },

  // The REST door: Node's HTTP, Hono and its adapter, the route, the body, the key, the tool's input.
  { phase: 'REST request', url: node('_http_server', '_http_common', '_http_incoming', '_http_outgoing', 'http') },
  { phase: 'REST request', url: dep('hono', '@hono/node-server', 'zod', 'qs') },
  { phase: 'REST request', url: ours('(?:transports|tools)/[^/]+') },
  { phase: 'REST request', name: native('node::http_parser::', 'llhttp_', 'llhttp__') },

  // A message composed for an API send, the Received, Date and Message-ID fields of any.
  { phase: 'message headers and MIME', url: ours('relay/(?:message|message-content)') },
  { phase: 'message headers and MIME', url: dep('libmime', 'libqp', 'libbase64') },

  // The sending pipeline's checks: authorized senders, deny rules, the spam filter, the send
  // policy, the memory budget, and the store's reads they make.
  {
    phase: 'checks',
    url: ours('relay/(?:pipeline|spam-filter|deny-rules|policy|addresses|refusal|auth-throttle|byte-budget|txid)'),
  },

  // Node's machinery, named only when nothing above it says what it served.
  {
    phase: 'sockets and streams',
    url: node('net', 'stream', 'internal/stream_base_commons', 'internal/streams/.+'),
    tier: 'weak',
  },
  {
    phase: 'event loop and promises',
    url: node(
      'internal/process/task_queues',
      'internal/timers',
      'timers',
      'events',
      'internal/event_target',
      'internal/async_hooks',
    ),
    tier: 'weak',
  },
  { phase: 'event loop and promises', name: native('uv__io_poll', 'uv__run_', 'uv_run$'), tier: 'weak' },
  // The store's reads and writes that nothing above names (the doors' own reads are their callers').
  {
    phase: 'store, other',
    url: /\/node_modules\/better-sqlite3\/|^file:\/\/(?!.*\/node_modules\/).*\/storage\//,
    tier: 'weak',
  },
  // Native code (perf's samples) with no JavaScript above it that a rule names.
  { phase: 'native, outside JavaScript', url: /^native:/, tier: 'fallback' },
]

const passes = (frame: CallFrame, test: FrameTest) =>
  (!test.url || test.url.test(frame.url)) && (!test.name || test.name.test(frame.functionName))

/** A frame of JavaScript (a module's code), not native code. */
const isScript = (frame: CallFrame) => /^(?:file|node):/.test(frame.url)

/**
 * The phase of each node of a profile's call tree: that of the first frame of its stack, from the
 * node up, that a rule names (a weak rule only when no other does, and so on). A rule about native
 * code names only native frames with no JavaScript between them and the leaf: what a JavaScript
 * callback does is its own phase's, whatever native code called it (a TLS socket's, say). Worked
 * out from the root down, each node from its parent's.
 */
export function phasesOf(profile: CpuProfile, rules: Rule[] = RULES): Map<number, Phase> {
  const unders = [...new Set(rules.flatMap((r) => (r.under ? [r.under] : [])))]
  /**
   * What the node's callers satisfy of the `under` tests, and the nearest phase each tier names:
   * among all of them, and among the JavaScript frames (and what is above them) alone.
   */
  type Walked = { above: boolean[]; tiers: (Phase | undefined)[]; scriptTiers: (Phase | undefined)[] }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const isChild = new Set(profile.nodes.flatMap((n) => n.children ?? []))
  const phases = new Map<number, Phase>()
  const none = TIERS.map(() => undefined)
  const todo: { id: number; parent: Walked }[] = profile.nodes
    .filter((n) => !isChild.has(n.id))
    .map((n) => ({ id: n.id, parent: { above: unders.map(() => false), tiers: none, scriptTiers: none } }))
  while (todo.length > 0) {
    const { id, parent } = todo.pop()!
    const n = byId.get(id)!
    const frame = n.callFrame
    const phaseNamed = (tier: Rule['tier']) =>
      rules.find((r) => r.tier === tier && passes(frame, r) && (!r.under || parent.above[unders.indexOf(r.under)]))
        ?.phase
    const script = isScript(frame)
    const inherited = script ? parent.scriptTiers : parent.tiers
    const tiers = TIERS.map((tier, i) => phaseNamed(tier) ?? inherited[i])
    const walked: Walked = {
      above: unders.map((u, i) => parent.above[i] || passes(frame, u)),
      tiers,
      scriptTiers: script ? tiers : parent.scriptTiers,
    }
    phases.set(id, tiers.find((p) => p !== undefined) ?? 'other')
    for (const c of n.children ?? []) todo.push({ id: c, parent: walked })
  }
  return phases
}

/** A frame as the report names it: its function, and where it is (the path inside the package or the product). */
export function frameName(frame: CallFrame): string {
  // A regular expression's code is named by its source, which can run to kilobytes.
  const name = frame.functionName.length > 100 ? `${frame.functionName.slice(0, 99)}…` : frame.functionName
  if (frame.url.startsWith('native:')) return `${name} [${frame.url.slice(7)}]`
  const where = frame.url
    .replace(/^file:\/\/.*\/node_modules\//, '')
    .replace(/^file:\/\/.*?\/(?:dist\/)?((?:relay|storage|transports|tools|bench|cli)\/|[^/]+\.js$)/, '$1')
  const at = where ? ` ${where}:${frame.lineNumber + 1}` : ''
  return `${name || '(anonymous)'}${at}`
}

export interface Breakdown {
  /** Samples taken in the window, and how many of them were busy (not idle). */
  samples: number
  busy: number
  /** Busy samples by phase (idle is left out). */
  phases: Map<Phase, number>
  /** Busy samples by the function they were taken in (self), for every phase and for "other" alone. */
  self: Map<string, number>
  otherSelf: Map<string, number>
  /**
   * Busy samples by the nearest JavaScript function on their stack (what V8's builtins, the
   * natives and the kernel did for it counted as its own), or their leaf when none is.
   */
  scriptSelf: Map<string, number>
  /** Wall time of the busy samples, µs: each sample stands for the time since the one before it. */
  busyUs: number
}

const noSamples = (): Breakdown => ({
  samples: 0,
  busy: 0,
  phases: new Map(),
  self: new Map(),
  otherSelf: new Map(),
  scriptSelf: new Map(),
  busyUs: 0,
})

/**
 * The samples of a profile taken within [from, to] (µs of the monotonic clock, as the profile's
 * own times and `process.hrtime` are on Linux; the whole profile without them), by phase.
 */
export function breakdown(profile: CpuProfile, window: { from?: number; to?: number } = {}): Breakdown {
  const phases = phasesOf(profile)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map(profile.nodes.flatMap((n) => (n.children ?? []).map((c) => [c, n.id] as const)))
  const scriptOf = (id: number) => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at))
      if (isScript(byId.get(at)!.callFrame)) return byId.get(at)!.callFrame
    return byId.get(id)!.callFrame
  }
  const out = noSamples()
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1)
  let t = profile.startTime
  for (const [i, id] of profile.samples.entries()) {
    const delta = profile.timeDeltas[i]
    t += delta
    if ((window.from !== undefined && t < window.from) || (window.to !== undefined && t > window.to)) continue
    out.samples++
    const phase = phases.get(id)!
    if (phase === 'idle') continue
    out.busy++
    out.busyUs += delta
    out.phases.set(phase, (out.phases.get(phase) ?? 0) + 1)
    const name = frameName(byId.get(id)!.callFrame)
    add(out.self, name)
    add(out.scriptSelf, frameName(scriptOf(id)))
    if (phase === 'other') add(out.otherSelf, name)
  }
  return out
}

/** The `n` largest entries, largest first. */
export const top = (counts: Map<string, number>, n: number) =>
  [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, n)

/** A thread's profile, by Node's thread id (0: the main thread), from the name `--cpu-prof` gives its file. */
export function profileFiles(dir: string): { threadId: number; file: string }[] {
  return readdirSync(dir)
    .map((f) => ({ f, m: /^CPU\.\d+\.\d+\.\d+\.(\d+)\.\d+\.cpuprofile$/.exec(f) }))
    .filter(({ m }) => m)
    .map(({ f, m }) => ({ threadId: Number(m![1]), file: `${dir}/${f}` }))
    .sort((a, b) => a.threadId - b.threadId)
}

export const readProfile = (file: string): CpuProfile => JSON.parse(readFileSync(file, 'utf8'))

/**
 * The names of the JIT's code, from the dump `node --perf-prof` writes (jit-<pid>.dump, perf's
 * jitdump format: a header, then records, each with a time of the monotonic clock in ns). Code is
 * freed and its addresses used again by other code, so an address is named by the latest code
 * loaded (or moved) there before the sample's time.
 */
export function jitNames(dump: Buffer): (address: number, time: number) => string | undefined {
  const LOAD = 0
  const MOVE = 1
  const entries: { start: number; end: number; time: number; name: string }[] = []
  const byIndex = new Map<number, string>()
  for (let at = dump.readUInt32LE(8); at + 16 <= dump.length; ) {
    const [id, size] = [dump.readUInt32LE(at), dump.readUInt32LE(at + 4)]
    if (size < 16) break
    const time = Number(dump.readBigUInt64LE(at + 8))
    if (id === LOAD) {
      const start = Number(dump.readBigUInt64LE(at + 32))
      const name = dump.toString('latin1', at + 56, dump.indexOf(0, at + 56))
      byIndex.set(Number(dump.readBigUInt64LE(at + 48)), name)
      entries.push({ start, end: start + Number(dump.readBigUInt64LE(at + 40)), time, name })
    } else if (id === MOVE) {
      const start = Number(dump.readBigUInt64LE(at + 40))
      const name = byIndex.get(Number(dump.readBigUInt64LE(at + 56)))
      if (name) entries.push({ start, end: start + Number(dump.readBigUInt64LE(at + 48)), time, name })
    }
    at += size
  }
  entries.sort((a, b) => a.start - b.start)
  return (address, time) => {
    let [lo, hi] = [0, entries.length]
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (entries[mid].start <= address) lo = mid + 1
      else hi = mid
    }
    let best: (typeof entries)[number] | undefined
    // Code objects are small: an entry that covers the address starts shortly before it.
    for (let i = lo - 1; i >= 0 && i >= lo - 64; i--) {
      const e = entries[i]
      if (e.end > address && e.time <= time && (!best || e.time > best.time)) best = e
    }
    return best?.name
  }
}

/**
 * A frame of perf's, as a `.cpuprofile` has it: JavaScript by its function, module and line (`JS:`
 * names of the JIT's, their tier's mark dropped), native code by its symbol and `native:` and its
 * file; the JIT's other code (builtins copied at run time, regular expressions) as `native:jit`.
 */
export function perfFrame(
  address: number,
  time: number,
  symbol: string,
  file: string,
  jit: (address: number, time: number) => string | undefined,
): CallFrame {
  const named = symbol === '[unknown]' ? jit(address, time) : undefined
  const name = named ?? symbol
  const js = /^JS:[*~^+'!"]*(.*?) ?((?:file|node|data):\S*?|\/\S*?)(?::(\d+):(\d+))?$/.exec(name)
  if (js)
    return {
      functionName: js[1],
      url: js[2].startsWith('/') ? `file://${js[2]}` : js[2],
      lineNumber: Number(js[3] ?? 1) - 1,
      columnNumber: Number(js[4] ?? 1) - 1,
    }
  return { functionName: name, url: `native:${named ? 'jit' : basename(file)}`, lineNumber: -1, columnNumber: -1 }
}

/** perf's samples of one thread, as a call tree (a `.cpuprofile` without times: each sample counts once). */
export interface PerfThread {
  name: string
  profile: CpuProfile
}

/**
 * The samples of a `perf record -g -k mono` file by thread, read through `perf script` (which must
 * be the perf that recorded them); `jit` is the JIT's dump (`--perf-prof`), which names its code.
 */
export async function perfThreads(data: string, jit?: string): Promise<Map<number, PerfThread>> {
  const names = jit ? jitNames(readFileSync(jit)) : () => undefined
  const script = spawn('perf', ['script', '-i', data, '-F', 'comm,tid,time,ip,sym,dso', '--ns'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  script.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => script.once('close', resolve))
  const threads = new Map<number, PerfThread & { index: Map<string, number> }>()
  const add = (tid: number, name: string, leafFirst: CallFrame[]) => {
    let t = threads.get(tid)
    if (!t) {
      const root = { functionName: '(root)', url: '', lineNumber: -1, columnNumber: -1 }
      const profile = {
        nodes: [{ id: 1, callFrame: root, children: [] }],
        startTime: 0,
        endTime: 0,
        samples: [],
        timeDeltas: [],
      }
      threads.set(tid, (t = { name, profile, index: new Map() }))
    }
    const { nodes } = t.profile
    let at = 1
    for (let i = leafFirst.length - 1; i >= 0; i--) {
      const frame = leafFirst[i]
      const key = `${at}\0${frame.functionName}\0${frame.url}\0${frame.lineNumber}`
      let id = t.index.get(key)
      if (id === undefined) {
        id = nodes.length + 1
        nodes.push({ id, callFrame: frame, children: [] })
        nodes[at - 1].children!.push(id)
        t.index.set(key, id)
      }
      at = id
    }
    t.profile.samples.push(at)
    t.profile.timeDeltas.push(1)
  }
  // A sample is a line with its thread's name and id and its time (s.ns, of the monotonic clock),
  // then a line a frame, leaf first, then an empty line.
  let sample: { tid: number; name: string; time: number; stack: CallFrame[] } | undefined
  for await (const line of createInterface({ input: script.stdout, crlfDelay: Number.POSITIVE_INFINITY })) {
    const head = /^\s*(\S+)\s+(\d+)\s+(\d+)\.(\d{9}):\s*$/.exec(line)
    const frame = /^\s+([0-9a-f]+) (.*) \((.*)\)$/.exec(line)
    if (head) sample = { tid: Number(head[2]), name: head[1], time: Number(head[3]) * 1e9 + Number(head[4]), stack: [] }
    else if (frame && sample)
      sample.stack.push(perfFrame(Number.parseInt(frame[1], 16), sample.time, frame[2], frame[3], names))
    else if (!line.trim() && sample) {
      add(sample.tid, sample.name, sample.stack)
      sample = undefined
    }
  }
  if (sample) add(sample.tid, sample.name, sample.stack)
  const code = await exited
  if (code !== 0) throw new Error(`perf script exited ${code}: ${stderr.trim()}`)
  return new Map([...threads].map(([tid, { name, profile }]) => [tid, { name, profile }]))
}

/** A thread's CPU and run-queue wait (ns, since it started), from `/proc/<pid>/task/<tid>/schedstat`. */
export interface ThreadTimes {
  name: string
  cpuNs: number
  waitNs: number
}

/** Every thread of a process now, by its id. */
export function threadTimes(pid: number): Map<number, ThreadTimes> {
  const out = new Map<number, ThreadTimes>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [cpu, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ').map(Number)
      out.set(Number(tid), {
        name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'latin1').trim(),
        cpuNs: cpu,
        waitNs: wait,
      })
    } catch {
      // ended meanwhile
    }
  }
  return out
}

/** The machine's CPU time so far (clock ticks): all of it, and the idle part. */
export function machineTimes(): { total: number; idle: number } {
  const cpu = readFileSync('/proc/stat', 'latin1').split('\n')[0].split(/\s+/).slice(1).map(Number)
  return { total: cpu.reduce((a, b) => a + b, 0), idle: cpu[3] + cpu[4] }
}

/** The groups of threads a report shows, by what Node names them. */
const GROUPS = [
  { label: 'main', test: (_name: string, tid: number, pid: number) => tid === pid },
  { label: 'engine', test: (name: string) => name === 'WorkerThread' },
  { label: 'thread pool', test: (name: string) => name.startsWith('libuv-worker') },
  { label: "V8's helpers", test: (name: string) => name === 'V8Worker' },
  { label: 'other threads', test: () => true },
]
const groupOf = (name: string, tid: number, pid: number) => GROUPS.findIndex((g) => g.test(name, tid, pid))

export interface Measured {
  /** What the leg was, for the report's heading. */
  title: string
  messages: number
  /** The window, µs of the monotonic clock. */
  from: number
  to: number
  pid: number
  threads: { before: Map<number, ThreadTimes>; after: Map<number, ThreadTimes> }
  machine: { before: ReturnType<typeof machineTimes>; after: ReturnType<typeof machineTimes> }
  /** perf's samples over the window, by thread id. */
  perf: Map<number, PerfThread>
  /** The `--cpu-prof` profiles the server wrote at exit, by Node's thread id. */
  profiles: { threadId: number; file: string }[]
}

/** Breakdowns added together (the threads of a group). */
function merged(all: Breakdown[]): Breakdown {
  const out = noSamples()
  const add = <K>(into: Map<K, number>, from: Map<K, number>) => {
    for (const [k, n] of from) into.set(k, (into.get(k) ?? 0) + n)
  }
  for (const b of all) {
    out.samples += b.samples
    out.busy += b.busy
    out.busyUs += b.busyUs
    add(out.phases, b.phases)
    add(out.self, b.self)
    add(out.otherSelf, b.otherSelf)
    add(out.scriptSelf, b.scriptSelf)
  }
  return out
}

const pct = (x: number) => (Number.isNaN(x) ? '—' : `${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`)
const us = (x: number) => (Number.isNaN(x) ? '—' : x >= 100 ? x.toFixed(0) : x.toFixed(1))
const THREAD_NOTES: Record<string, string> = {
  'thread pool': "libuv's: DKIM's RSA signatures, the log's writes",
  "V8's helpers": 'garbage collection and compiling beside the threads',
}

/**
 * The report of one leg: each group of threads' CPU over the window (busy: its share of one core;
 * waiting: for a core, runnable), then the CPU per message by phase of each group that perf
 * sampled (its samples' shares of the CPU the kernel counted), beside the shares of the samples
 * `--cpu-prof` took in the same window, then the functions behind "other".
 */
export function report(m: Measured): string {
  const seconds = (m.to - m.from) / 1e6
  const groups = GROUPS.map((g) => ({
    label: g.label,
    threads: 0,
    names: new Set<string>(),
    cpuNs: 0,
    waitNs: 0,
    perf: [] as Breakdown[],
  }))
  for (const [tid, after] of m.threads.after) {
    const before = m.threads.before.get(tid) ?? { cpuNs: 0, waitNs: 0 }
    const g = groups[groupOf(after.name, tid, m.pid)]
    g.threads++
    g.names.add(after.name)
    g.cpuNs += after.cpuNs - before.cpuNs
    g.waitNs += after.waitNs - before.waitNs
  }
  for (const [tid, t] of m.perf) groups[groupOf(t.name, tid, m.pid)].perf.push(breakdown(t.profile))
  const machineIdle = (m.machine.after.idle - m.machine.before.idle) / (m.machine.after.total - m.machine.before.total)
  const label = (g: (typeof groups)[number]) =>
    `${g.label}${g.label === 'other threads' ? ` (${[...g.names].join(', ')})` : THREAD_NOTES[g.label] ? ` (${THREAD_NOTES[g.label]})` : ''}${g.threads > 1 ? `, ${g.threads} threads` : ''}`
  const lines = [
    `### ${m.title}`,
    '',
    `${m.messages} messages in ${seconds.toFixed(1)} s (${(m.messages / seconds).toFixed(0)} a second), until the sink had the last; the machine ${pct(machineIdle)} idle meanwhile.`,
    '',
    '| thread | busy (of one core) | CPU per message | waiting for a core, per message |',
    '|---|---|---|---|',
    ...groups
      .filter((g) => g.threads > 0)
      .map(
        (g) =>
          `| ${label(g)} | ${pct(g.cpuNs / 1e9 / seconds)} | ${us(g.cpuNs / 1e3 / m.messages)} µs | ${us(g.waitNs / 1e3 / m.messages)} µs |`,
      ),
  ]
  const workers = m.profiles.filter((p) => p.threadId !== 0)
  const cpuProf = new Map(
    m.profiles.map((p) => [
      p.threadId === 0 ? 'main' : workers.length === 1 ? 'engine' : `worker ${p.threadId}`,
      breakdown(readProfile(p.file), { from: m.from, to: m.to }),
    ]),
  )
  const sampled = groups.filter((g) => g.label !== 'other threads')
  const perfOf = new Map(sampled.map((g) => [g.label, merged(g.perf)]))
  /** µs of CPU per message: the phase's share of the group's samples, of the CPU the kernel counted. */
  const perMessage = (g: (typeof groups)[number], samples: number) => {
    const b = perfOf.get(g.label)!
    return b.busy === 0 ? Number.NaN : (samples / b.busy) * (g.cpuNs / 1e3 / m.messages)
  }
  /** The two threads that run the relay's JavaScript get their shares and --cpu-prof's beside the µs. */
  const detailed = (g: (typeof groups)[number]) => g.label === 'main' || g.label === 'engine'
  lines.push(
    '',
    `| phase | ${sampled
      .map((g) =>
        detailed(g)
          ? `${g.label}: µs per message | ${g.label}: share | ${g.label}: --cpu-prof's share`
          : `${g.label}: µs per message`,
      )
      .join(' | ')} |`,
    `|---|${sampled.map((g) => (detailed(g) ? '---|---|---' : '---')).join('|')}|`,
  )
  // Every phase, with samples or not: runs before and after a change compare row by row.
  for (const phase of PHASES.filter((p) => p !== 'idle')) {
    const cells = sampled.map((g) => {
      const b = perfOf.get(g.label)!
      const n = b.phases.get(phase) ?? 0
      if (!detailed(g)) return us(perMessage(g, n))
      const c = cpuProf.get(g.label)
      return `${us(perMessage(g, n))} | ${pct(n / b.busy)} | ${pct(c ? (c.phases.get(phase) ?? 0) / c.busy : Number.NaN)}`
    })
    lines.push(`| ${phase} | ${cells.join(' | ')} |`)
  }
  const all = sampled.map((g) => {
    const b = perfOf.get(g.label)!
    if (!detailed(g)) return us(perMessage(g, b.busy))
    const c = cpuProf.get(g.label)
    return `${us(perMessage(g, b.busy))} | ${b.busy} samples | ${c ? `${c.busy} of ${c.samples} busy` : '—'}`
  })
  lines.push(`| all | ${all.join(' | ')} |`)
  for (const g of sampled) {
    const b = perfOf.get(g.label)!
    if (!b.phases.get('other')) continue
    lines.push('', `"other" in the ${g.label}'s samples, by function (share of its samples):`)
    for (const [name, n] of top(b.otherSelf, 10)) lines.push(`- ${name}: ${pct(n / b.busy)}`)
  }
  return lines.join('\n')
}

/** The command: each profile's phases and the functions with the most samples of their own. */
async function main(args: string[]) {
  const n = Number(args.find((a) => a.startsWith('--top='))?.slice(6) ?? 30)
  const jit = args.find((a) => a.startsWith('--jit='))?.slice(6)
  const print = (title: string, b: Breakdown) => {
    console.log(`\n## ${title}: ${b.busy} busy samples of ${b.samples}\n`)
    for (const phase of PHASES) {
      const k = b.phases.get(phase)
      if (k) console.log(`${phase.padEnd(28)} ${pct(k / b.busy).padStart(6)}`)
    }
    console.log(`\nthe ${n} functions with the most samples of their own:`)
    for (const [name, k] of top(b.self, n)) console.log(`${pct(k / b.busy).padStart(6)}  ${name}`)
    console.log(`\nthe ${n} JavaScript functions with the most, counting what the natives under them did:`)
    for (const [name, k] of top(b.scriptSelf, n)) console.log(`${pct(k / b.busy).padStart(6)}  ${name}`)
  }
  for (const file of args.filter((a) => !a.startsWith('--'))) {
    if (file.endsWith('.cpuprofile')) print(basename(file), breakdown(readProfile(file)))
    else
      for (const [tid, t] of await perfThreads(file, jit))
        print(`${basename(file)}, ${t.name} ${tid}`, breakdown(t.profile))
  }
}

if (process.argv[1]?.endsWith('profile.js')) await main(process.argv.slice(2))
