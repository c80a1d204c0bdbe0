import { isMainThread, parentPort, workerData } from 'node:worker_threads'
import type { Config } from '../config.js'
import { type EngineCall, type EngineMetrics, forwardedMetrics } from '../metrics.js'
import { MailroomError } from '../errors.js'
import { startThread } from '../esm-resolve.js'
import { createLogger, type LogStream } from '../logger.js'
import { openStore } from '../storage/index.js'
import type { NewMessage, RefusedSend } from '../storage/store.js'
import { type CallOutcome, failure, threadCalls } from '../thread-calls.js'
import { DeliveryWorker } from './delivery.js'
import { type CheckedMessage, type IntakeAnswer, storeChecked } from './inbound/intake.js'
import type { Intake } from './pipeline.js'
import { createResolver } from './routes.js'
import { WebhookWorker } from './webhooks.js'

/**
 * The relay's engine thread of `mailroom serve`: with its own connection to the database, it
 * commits accepted messages to the durable queue (group commit, one fsync per batch) and runs
 * the delivery worker over it. Neither the commits nor outbound SMTP then take turns with the
 * doors on the main event loop, and all queue writes happen in this one thread, so they never
 * wait for each other's locks. So do the spam filter's events and the refusals' counts, written
 * as often as messages (at every spam-indicative subject and refused recipient). A message the
 * MX door received and checked is parsed and stored here too, so that one message is parsed and
 * committed while the door checks the next. The main thread keeps its own connection for
 * everything else.
 */
export interface Engine extends Intake {
  /**
   * Resolves once the message is committed (the reply to the client may then be sent). The
   * memory under the pieces of `raw` (their whole ArrayBuffers) is handed over to the engine
   * thread: the caller must not read it afterwards. The spam filter's events are written there too.
   */
  enqueue(message: NewMessage): Promise<{ rowId: number }>
  /**
   * Parses and stores a message the MX door received and checked (storeChecked, the commit in
   * the engine thread's group commit); resolves with the door's reply once it is committed. The
   * memory under the pieces of `raw` is handed over as `enqueue`'s is.
   */
  storeChecked(message: CheckedMessage): Promise<IntakeAnswer>
  /** Why the engine is not delivering (stopping, or its thread died), or null while it is. */
  stopped(): string | null
  stop(): Promise<void>
}

type BlockWrites = Pick<Intake, 'addEvent' | 'takeSubject'>
// Messages from the engine carry batches: whatever one turn of its event loop produced.
type ToEngine =
  | { enqueue: { id: number; message: NewMessage } }
  | { checked: { id: number; message: CheckedMessage } }
  | { blocks: { id: number; method: keyof BlockWrites; args: unknown[] } }
  | { refuse: { id: number; refused: RefusedSend } }
  | { stop: true }
type FromEngine =
  | { ready: true }
  | { outcomes: CallOutcome[] }
  | { log: string }
  | { metrics: EngineCall[] }
  | { stopped: true }

/** Collects items and hands them over together once the current turn of the event loop is done. */
function batcher<T>(send: (items: T[]) => void, schedule: (f: () => void) => void): (item: T) => void {
  let items: T[] = []
  return (item) => {
    if (items.push(item) > 1) return
    schedule(() => {
      const out = items
      items = []
      send(out)
    })
  }
}

/**
 * Starts the engine thread. Its log lines come back in batches and go out through `log`, the main
 * thread's logger's own stream, so that stdout has one writer and lines stay whole. `onFailure` is called if the
 * thread dies: nothing can be accepted after that. What the thread counts (deliveries) comes back
 * the same way, in batches, and is replayed on `metrics`.
 */
export async function startEngineThread(
  config: Config,
  log: LogStream,
  onFailure: (err: Error) => void,
  metrics?: { replay(calls: EngineCall[]): void },
): Promise<Engine> {
  const worker = startThread(new URL(import.meta.url), {
    workerData: { mailroomEngine: config },
  })
  const calls = threadCalls()
  let dead: Error | null = null
  let stopping = false
  let ready: () => void
  const started = new Promise<void>((resolve) => (ready = resolve))
  let stopped: () => void
  const done = new Promise<void>((resolve) => (stopped = resolve))

  worker.on('message', (m: FromEngine) => {
    if ('outcomes' in m) m.outcomes.forEach(calls.settle)
    else if ('log' in m) log.write(m.log)
    else if ('metrics' in m) metrics?.replay(m.metrics)
    else if ('ready' in m) ready()
    else if ('stopped' in m) stopped()
  })
  const fail = (err: Error) => {
    if (dead) return
    dead = err
    calls.failAll(err)
    ready()
    stopped()
    if (!stopping) onFailure(err)
  }
  worker.on('error', fail)
  worker.on('exit', (code) => fail(new Error(`the relay engine thread exited (code ${code})`)))
  await started
  if (dead) throw dead
  // Each message goes to the engine as soon as it is handed over, not at the end of this turn:
  // the engine starts its commit while this thread still reads the requests that came with it,
  // so the two threads overlap instead of taking turns. The engine's group commit still shares
  // each fsync between everything that arrived meanwhile.
  const send = (id: number, message: NewMessage) => {
    const { raw, memory } = handOver(message.raw)
    worker.postMessage({ enqueue: { id, message: { ...message, raw } } } satisfies ToEngine, memory)
  }
  const sendChecked = (id: number, message: CheckedMessage) => {
    const { raw, memory } = handOver(message.raw)
    worker.postMessage({ checked: { id, message: { ...message, raw } } } satisfies ToEngine, memory)
  }

  /** A request to the engine, answered with its outcome. */
  const ask = <T>(post: (id: number) => void): Promise<T> => {
    if (dead) return Promise.reject(new MailroomError(503, 'the relay engine is not running; nothing can be queued'))
    return calls.call(post)
  }
  /** A write of the store's spam-filter events, made by the engine thread's store. */
  const blocksCall =
    <M extends keyof BlockWrites>(method: M) =>
    (...args: Parameters<BlockWrites[M]>) =>
      ask<Awaited<ReturnType<BlockWrites[M]>>>((id) =>
        worker.postMessage({ blocks: { id, method, args } } satisfies ToEngine),
      )

  return {
    enqueue: (message) => ask((id) => send(id, message)),
    storeChecked: (message) => ask((id) => sendChecked(id, message)),
    addEvent: blocksCall('addEvent'),
    takeSubject: blocksCall('takeSubject'),
    refuse: (refused) => ask<number>((id) => worker.postMessage({ refuse: { id, refused } } satisfies ToEngine)),
    stopped: () =>
      dead ? `the relay engine stopped: ${dead.message}` : stopping ? 'the relay engine is stopping' : null,
    async stop() {
      stopping = true
      if (!dead) worker.postMessage({ stop: true } satisfies ToEngine)
      await done
      await worker.terminate()
    },
  }
}

/**
 * The pieces of a message as they move to the engine without a copy: the memory under each is
 * transferred. A small Buffer is a view into Node's shared pool, which must not move (and would be
 * copied whole), so its own bytes are copied out first.
 */
function handOver(pieces: Buffer[]): { raw: Buffer[]; memory: ArrayBuffer[] } {
  const raw = pieces.map((piece) =>
    piece.buffer.byteLength > Buffer.poolSize ? piece : Buffer.from(new Uint8Array(piece).buffer),
  )
  return { raw, memory: [...new Set(raw.map((piece) => piece.buffer as ArrayBuffer))] }
}

/** The pieces as they arrive, Uint8Arrays: the same memory viewed as Buffers, not copied. */
const asBuffers = (pieces: Uint8Array[]) =>
  pieces.map((piece) => Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength))

/** The thread's side: its own store, logger and delivery worker. */
async function runEngineThread(config: Config): Promise<void> {
  const port = parentPort!
  const post = (m: FromEngine) => port.postMessage(m)
  const logger = createLogger(config, {
    write: batcher<string>((lines) => post({ log: lines.join('') }), setImmediate),
  })
  // Counted here, replayed on the main thread's metrics, which GET /metrics renders.
  const metrics: EngineMetrics = forwardedMetrics(
    batcher<EngineCall>((calls) => post({ metrics: calls }), setImmediate),
  )
  // This connection mostly appends: the store keeps its cache small, beside the main thread's own.
  const store = await openStore(config, { appending: true })
  const resolver = createResolver(config.delivery.dnsServers)
  const worker = new DeliveryWorker({ store, config, logger, clock: Date.now, resolver, metrics })
  await worker.start()
  // Beside delivery, with slots of its own: a slow or dead endpoint never holds up a delivery.
  const webhooks = new WebhookWorker({ store, config, logger, clock: Date.now, resolver, metrics })
  await webhooks.start()
  // A received message is parsed here, beside its commit, while the door checks the next one.
  const storeInbound = storeChecked({
    receive: (message) => store.inbound.receive(message),
    hostname: config.inbound.mxHostname,
    clock: Date.now,
    logger,
  })
  // The outcomes of one group commit are resolved together, so they go back in one message.
  const reply = batcher<CallOutcome>((outcomes) => post({ outcomes }), queueMicrotask)
  port.on('message', (m: ToEngine) => {
    if ('enqueue' in m) {
      const { id, message } = m.enqueue
      worker.accept({ ...message, raw: asBuffers(message.raw) }).then(
        ({ rowId }) => reply({ id, result: { rowId } }),
        (err: Error) => reply(failure(id, err)),
      )
    } else if ('checked' in m) {
      const { id, message } = m.checked
      storeInbound({ ...message, raw: asBuffers(message.raw) }).then(
        (result) => reply({ id, result }),
        (err: Error) => reply(failure(id, err)),
      )
    } else if ('blocks' in m) {
      const { id, method, args } = m.blocks
      ;(store.blocks[method] as (...a: unknown[]) => Promise<unknown>)(...args).then(
        (result) => reply({ id, result }),
        (err: Error) => reply(failure(id, err)),
      )
    } else if ('refuse' in m) {
      const { id, refused } = m.refuse
      store.mail.refuse(refused).then(
        (result) => reply({ id, result }),
        (err: Error) => reply(failure(id, err)),
      )
    } else if ('stop' in m) {
      void Promise.all([worker.stop(), webhooks.stop()])
        .then(() => store.close())
        .then(() => post({ stopped: true }))
    }
  })
  post({ ready: true })
}

if (!isMainThread && workerData?.mailroomEngine) await runEngineThread(workerData.mailroomEngine as Config)
