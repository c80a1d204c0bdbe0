import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import {
  breakdown,
  type CallFrame,
  type CpuProfile,
  jitNames,
  PHASES,
  perfFrame,
  phasesOf,
} from '../../bench/profile.js'
import { describeWith, waitFor } from '../system/peers.js'
import { processesNaming, removeRun, startRun } from './run-support.js'

const ours = (path: string) => `file:///srv/mailroom/dist/${path}.js`

/**
 * A profile of one sample per stack: each stack is its frames from the root down, the root
 * itself left out, as [function, url].
 */
function profileOf(stacks: [string, string][][], deltas = stacks.map(() => 1000)): CpuProfile {
  const frame = (functionName: string, url: string): CallFrame => ({
    functionName,
    url,
    lineNumber: 0,
    columnNumber: 0,
  })
  const nodes: CpuProfile['nodes'] = [{ id: 1, callFrame: frame('(root)', ''), children: [] }]
  const samples = stacks.map((stack) => {
    let at = nodes[0]
    for (const [name, url] of stack) {
      let next = nodes.find((n) => at.children!.includes(n.id) && n.callFrame.functionName === name)
      if (!next) {
        next = { id: nodes.length + 1, callFrame: frame(name, url), children: [] }
        nodes.push(next)
        at.children!.push(next.id)
      }
      at = next
    }
    return at.id
  })
  return { nodes, startTime: 0, endTime: deltas.reduce((a, b) => a + b, 0), samples, timeDeltas: deltas }
}

const phaseOfEach = (profile: CpuProfile) => {
  const phases = phasesOf(profile)
  return profile.samples.map((id) => phases.get(id))
}

describe('bench profile: the phases of samples', () => {
  it('takes the frame nearest the leaf that a rule names', () => {
    const submit: [string, string] = ['submit', ours('relay/pipeline')]
    const profile = profileOf([
      // The checks call DKIM, which hashes with Node's crypto, and logs a line.
      [submit],
      [
        submit,
        ['signMessage', ours('relay/dkim')],
        ['dkimSignature', ours('relay/dkim')],
        ['update', 'node:internal/crypto/hash'],
        ['update', ''],
      ],
      [
        submit,
        ['signMessage', ours('relay/dkim')],
        ['dkimSignature', ours('relay/dkim')],
        ['relaxedBody', ours('relay/dkim')],
      ],
      [submit, ['signMessage', ours('relay/dkim')], ['dkimSignature', ours('relay/dkim')]],
      [submit, ['info', 'file:///srv/mailroom/node_modules/pino/lib/proto.js']],
      // The signature back from the thread pool: Node's frame calls ours.
      [['job.ondone', 'node:internal/crypto/sig']],
      // A SHA-256 elsewhere is not DKIM's.
      [
        ['authenticate', ours('transports/auth')],
        ['hash', 'node:internal/crypto/hash'],
      ],
      // smtp-server writing a reply: the socket's write is the door's.
      [
        ['send', 'file:///srv/mailroom/node_modules/smtp-server/dist/cjs/smtp-connection.js'],
        ['write', 'node:net'],
        ['writev', ''],
      ],
    ])
    expect(phaseOfEach(profile)).toEqual([
      'checks',
      'DKIM: hashing',
      'DKIM: canonicalization',
      'DKIM: signing',
      'logging',
      'DKIM: signing',
      'REST request',
      'SMTP session',
    ])
  })

  it("tells the commit's group commit from the record's by what ran it, and names V8's own entries", () => {
    const flush: [string, string] = ['flush', ours('storage/sqlite/group-commit')]
    const run: [string, string] = ['run', '']
    const profile = profileOf([
      [
        ['processImmediate', 'node:internal/timers'],
        flush,
        ['transaction', 'file:///srv/mailroom/node_modules/better-sqlite3/lib/methods/transaction.js'],
        run,
      ],
      [['processTimers', 'node:internal/timers'], ['listOnTimeout', 'node:internal/timers'], flush, run],
      [['(idle)', '']],
      [['(program)', '']],
      [['(garbage collector)', '']],
    ])
    expect(phaseOfEach(profile)).toEqual([
      'commit',
      'record',
      'idle',
      'native, outside JavaScript',
      'garbage collection',
    ])
  })

  it('names Node\'s machinery only when nothing above it says more, and leaves the unknown to "other"', () => {
    const read: [string, string] = ['onStreamRead', 'node:internal/stream_base_commons']
    const profile = profileOf([
      [read],
      [
        read,
        ['onData', 'file:///srv/mailroom/node_modules/smtp-server/dist/cjs/smtp-stream.js'],
        ['push', 'node:internal/streams/readable'],
      ],
      [['mystery', ours('relay/unknown')]],
      // A module's top-level code runs while it loads, whatever module it is.
      [
        ['run', 'node:internal/modules/esm/module_job'],
        ['', ours('relay/dkim')],
      ],
    ])
    expect(phaseOfEach(profile)).toEqual(['sockets and streams', 'SMTP session', 'other', 'startup, loading and exit'])
  })

  it('counts the samples of a window only, the busy ones by phase and by function', () => {
    // Samples at 1, 2, 3 and 4 ms; the window takes the middle two.
    const profile = profileOf(
      [
        [['(idle)', '']],
        [['submit', ours('relay/pipeline')]],
        [['mystery', ours('relay/unknown')]],
        [['submit', ours('relay/pipeline')]],
      ],
      [1000, 1000, 1000, 1000],
    )
    const b = breakdown(profile, { from: 1500, to: 3500 })
    expect([b.samples, b.busy, b.busyUs]).toEqual([2, 2, 2000])
    expect([...b.phases]).toEqual([
      ['checks', 1],
      ['other', 1],
    ])
    expect([...b.otherSelf]).toEqual([['mystery relay/unknown.js:1', 1]])
    expect(breakdown(profile).samples).toBe(4)
  })
})

describe("bench profile: perf's samples", () => {
  const native = (name: string, file = 'node'): [string, string] => [name, `native:${file}`]
  const smtp: [string, string] = ['send', 'file:///srv/mailroom/node_modules/smtp-server/dist/esm/smtp-connection.js']

  /** A jitdump (perf's format, as `node --perf-prof` writes it) of these loads and moves of code. */
  function jitDump(
    records: ({ time: number; index: number; size: number } & (
      | { at: number; name: string }
      | { from: number; to: number }
    ))[],
  ): Buffer {
    const header = Buffer.alloc(40)
    header.writeUInt32LE(0x4a695444, 0)
    header.writeUInt32LE(1, 4)
    header.writeUInt32LE(40, 8)
    return Buffer.concat([
      header,
      ...records.map((r) => {
        const load = 'name' in r
        const out = Buffer.alloc(load ? 57 + r.name.length : 64)
        out.writeUInt32LE(load ? 0 : 1, 0)
        out.writeUInt32LE(out.length, 4)
        out.writeBigUInt64LE(BigInt(r.time), 8)
        if (load) {
          out.writeBigUInt64LE(BigInt(r.at), 32)
          out.writeBigUInt64LE(BigInt(r.size), 40)
          out.writeBigUInt64LE(BigInt(r.index), 48)
          out.write(r.name, 56, 'latin1')
        } else {
          out.writeBigUInt64LE(BigInt(r.from), 32)
          out.writeBigUInt64LE(BigInt(r.to), 40)
          out.writeBigUInt64LE(BigInt(r.size), 48)
          out.writeBigUInt64LE(BigInt(r.index), 56)
        }
        return out
      }),
    ])
  }

  it("names the JIT's code by what was at the address at the sample's time, JavaScript by function, module and line", () => {
    const jit = jitNames(
      jitDump([
        {
          time: 100,
          index: 1,
          at: 0x7f0000001000,
          size: 0x100,
          name: 'JS:*old file:///srv/mailroom/dist/relay/old.js:1:1',
        },
        { time: 150, index: 2, at: 0x7f0000002000, size: 0x40, name: 'RegExp:[^\\r\\n]{999}' },
        // Freed, and its addresses used again by later code.
        {
          time: 200,
          index: 3,
          at: 0x7f0000001000,
          size: 0x80,
          name: 'JS:^submit file:///srv/mailroom/dist/relay/pipeline.js:120:3',
        },
        // Moved by the garbage collector.
        { time: 300, index: 1, from: 0x7f0000001000, to: 0x7f0000005000, size: 0x100 },
      ]),
    )
    expect(jit(0x7f0000001010, 150)).toBe('JS:*old file:///srv/mailroom/dist/relay/old.js:1:1')
    expect(jit(0x7f0000001010, 250)).toBe('JS:^submit file:///srv/mailroom/dist/relay/pipeline.js:120:3')
    expect(jit(0x7f0000001010, 50)).toBeUndefined()
    expect(jit(0x7f0000005010, 350)).toBe('JS:*old file:///srv/mailroom/dist/relay/old.js:1:1')
    expect(perfFrame(0x7f0000001010, 250, '[unknown]', '[unknown]', jit)).toEqual({
      functionName: 'submit',
      url: ours('relay/pipeline'),
      lineNumber: 119,
      columnNumber: 2,
    })
    expect(perfFrame(0x7f0000002010, 250, '[unknown]', '[unknown]', jit).url).toBe('native:jit')
    // A CommonJS module is named by its path.
    expect(perfFrame(1, 0, 'JS:+run /srv/mailroom/node_modules/better-sqlite3/lib/index.js:5:9', 'x', jit).url).toBe(
      'file:///srv/mailroom/node_modules/better-sqlite3/lib/index.js',
    )
    expect(perfFrame(1, 0, 'SSL_write', '/usr/bin/node', jit)).toMatchObject({
      functionName: 'SSL_write',
      url: 'native:node',
    })
  })

  it("gives native code its own phase only below the last JavaScript: a callback is its caller's", () => {
    const read = [native('uv__io_poll'), native('uv__read'), native('node::crypto::TLSWrap::OnStreamRead')]
    const write = [smtp, native('node::StreamBase::WriteString')]
    const profile = profileOf([
      // Decrypting a record, then the JavaScript it calls back.
      [...read, native('aesni_gcm_decrypt')],
      [...read, ['onStreamRead', 'node:internal/stream_base_commons'], ['_onCommand', smtp[1]]],
      // A reply written: encrypted, then sent.
      [...write, native('node::crypto::TLSWrap::DoWrite'), native('aesni_gcm_encrypt')],
      [
        ...write,
        native('node::crypto::TLSWrap::EncOut'),
        native('uv_try_write'),
        native('tcp_sendmsg', '[kernel.kallsyms]'),
      ],
      // The allocator, whoever called it; native code that no rule names.
      [['submit', ours('relay/pipeline')], native('_int_malloc', 'libc.so.6')],
      [native('epoll_pwait', 'libc.so.6'), native('do_epoll_wait', '[kernel.kallsyms]')],
    ])
    expect(phaseOfEach(profile)).toEqual([
      'TLS',
      'SMTP session',
      'TLS',
      'socket I/O',
      'malloc and free',
      'native, outside JavaScript',
    ])
  })
})

/** Why `profile` cannot run here, if it cannot: it needs perf. */
function perfMissing(): string | undefined {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' })
    return undefined
  } catch {
    return 'perf is not installed (Debian: linux-perf)'
  }
}

describeWith('bench profile: a run at a tiny scale', 'perf', perfMissing(), () =>
  describe('bench profile: a run at a tiny scale', () => {
    let tmp: string
    let keep: string
    afterEach(() => {
      removeRun(tmp)
      rmSync(keep, { recursive: true, force: true })
    })

    it('profiles every thread under each load, prints where the CPU went, and leaves nothing behind', async () => {
      tmp = mkdtempSync(join(tmpdir(), 'mailroom-bench-profile-'))
      keep = mkdtempSync(join(tmpdir(), 'mailroom-bench-profiles-'))
      const run = startRun('profile', tmp, { BENCH_MESSAGES: '40', BENCH_PROFILE_KEEP: keep })
      expect(await run.exited, run.stdout() + run.stderr()).toBe(0)

      const legs = run.stdout().split(/^### /m).slice(1)
      expect(legs.map((l) => l.slice(0, l.indexOf(':')))).toEqual([
        'Relay',
        'The same unsigned',
        'The same without TLS',
        'REST',
      ])
      const number = String.raw`\d+(?:\.\d+)?`
      // A thread that perf did not catch on a core in so short a window has no shares ("—").
      const maybe = `(?:${number}|—)`
      for (const leg of legs) {
        expect(leg).toMatch(new RegExp(`^40 messages in ${number} s \\(\\d+ a second\\)`, 'm'))
        // How busy each thread was, and its CPU per message: the two threads that run JavaScript,
        // and the thread pool that signs.
        for (const thread of ['main', 'engine', 'thread pool'])
          expect(leg).toMatch(
            new RegExp(`^\\| ${thread}[^|]* \\| ${number}% \\| ${number} µs \\| ${number} µs \\|$`, 'm'),
          )
        // Every phase: the CPU per message, perf's share and --cpu-prof's of the main and engine
        // threads, the CPU per message of the thread pool and of V8's helpers.
        const detailed = `${number} \\| ${number}% \\| ${number}%`
        for (const phase of PHASES.filter((p) => p !== 'idle'))
          expect(leg).toMatch(
            new RegExp(
              `^\\| ${phase.replace(/[/()]/g, '\\$&')} \\| ${detailed} \\| ${detailed} \\| ${maybe} \\| ${maybe} \\|$`,
              'm',
            ),
          )
        // Both threads were seen busy by both profilers in the window.
        const all = new RegExp(
          `^\\| all \\| ${number} \\| (\\d+) samples \\| (\\d+) of \\d+ busy \\| ${number} \\| (\\d+) samples \\| (\\d+) of \\d+ busy \\| ${maybe} \\| ${maybe} \\|$`,
          'm',
        ).exec(leg)
        expect(all, leg).not.toBeNull()
        expect(
          all!
            .slice(1)
            .map(Number)
            .every((n) => n > 0),
        ).toBe(true)
      }

      // The raw profiles were kept: each thread's --cpu-prof (the engine's is Node's thread 1), perf's
      // samples and the JIT's dump that names their code.
      const kept = readdirSync(keep)
      for (const name of ['relay', 'relay-unsigned', 'relay-plain', 'rest']) {
        const files = kept.filter((f) => f.startsWith(`${name}.CPU.`))
        expect(files.map((f) => f.split('.')[5]).sort()).toEqual(['0', '1'])
        for (const f of files) expect(JSON.parse(readFileSync(join(keep, f), 'utf8')).samples.length).toBeGreaterThan(0)
        expect(kept).toContain(`${name}.perf.data`)
        expect(kept.some((f) => new RegExp(`^${name}\\.jit-\\d+\\.dump$`).test(f))).toBe(true)
      }

      // Nothing is left: not the run's files, nor its processes.
      expect(readdirSync(tmp)).toEqual([])
      await waitFor(async () => processesNaming(tmp).length === 0, 5_000)
    }, 180_000)
  }),
)
