import { generateKeyPairSync, randomBytes } from 'node:crypto'
import type { AttemptOutcome, LogQuery, NewMessage, Store, VolumeCounts } from '../../../storage/store.js'

/** A store opened for one test: its own empty database, and a second connection to it when the backend has one. */
export interface OpenedStore {
  store: Store
  close(): Promise<void>
  /** Another connection to the same database (another process or node); the suite closes it. */
  reopen?(): Promise<Store>
  /**
   * How many stored parts of message bytes the database holds, of all messages: what `queue.body()`
   * cannot show, bytes kept after nothing can read them.
   */
  bodyParts(): Promise<number>
  /**
   * Whether the store's own connection has a commit on disk before it returns (not only in the
   * operating system's cache), and the setting that decides it as the database states it (SQLite
   * `synchronous=FULL`).
   */
  durability(): Promise<{ durable: boolean; setting: string }>
}

/** What the suite's tests share: filled in before each test. */
export interface Fixture {
  opened: OpenedStore
  store: Store
  accountId: number
  orderId: number
  /** An order of another account. */
  otherOrderId: number
  otherAccountId: number
  /** A live API key of the fixture's account. */
  apiKey: string
  /** Opens another connection to the same database, closed after the test. */
  another(): Promise<Store>
}

/** How long the suite's leases last. */
export const LEASE_MS = 60_000
/** A fixed moment, so that times in the answers are known. */
export const T0 = Date.UTC(2026, 0, 5, 12)

let sequence = 0
/** A message of the fixture's order (or of `overrides`' order), accepted at `T0` unless told. */
export function newMessage(f: Pick<Fixture, 'accountId' | 'orderId'>, overrides: Partial<NewMessage> = {}): NewMessage {
  sequence++
  return {
    txid: randomBytes(9).toString('hex'),
    accountId: f.accountId,
    orderId: f.orderId,
    envFrom: 'sender@a.example',
    recipients: ['rcpt@b.example'],
    headerFrom: null,
    replyTo: null,
    subject: `message ${sequence}`,
    messageId: null,
    origin: '192.0.2.1',
    transtype: 'HTTP',
    interface: 'api',
    sendingZone: 'default',
    raw: [Buffer.from(`Subject: message ${sequence}\r\n\r\nbody\r\n`)],
    time: T0,
    ...overrides,
  }
}

/** The outcome of an attempt on row `id`, made at `time`, as delivery records it. */
export const outcome = (
  id: number,
  state: AttemptOutcome['state'],
  nextAttemptAt: number | null = null,
  time = T0,
): AttemptOutcome => ({
  id,
  state,
  code: { delivered: 250, deferred: 451, failed: 550 }[state],
  response: { delivered: '2.0.0 ok', deferred: '4.7.1 try again later', failed: '5.1.1 no such user' }[state],
  mxHostname: `mx.${state}.example`,
  mxAddress: '192.0.2.25',
  tls: state !== 'failed',
  tlsPolicy: 'testing',
  tlsPolicyDomain: 'b.example',
  certValid: state === 'failed' ? null : state === 'delivered',
  nextAttemptAt: state === 'deferred' ? nextAttemptAt : null,
  time,
})

/** The log of the fixture's order, one row per recipient, oldest first. */
export const logOf = (f: Fixture, query: Partial<LogQuery> = {}, store = f.store) =>
  store.mail.log({
    orderId: f.orderId,
    skip: 0,
    limit: 1000,
    dir: 'asc',
    groupby: 'recipient',
    ...query,
  })

/** A fresh Ed25519 DKIM key pair: the private key as PKCS#8 PEM, the public one as its record's `p=`. */
export const ed25519 = () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64'),
  }
}

/** A bucket of the volume index: `time`'s counts, zero but for those given. */
export const volumeCounts = (time: number, counts: Partial<VolumeCounts> = {}) => ({
  time,
  accepted: 0,
  delivered: 0,
  deferred: 0,
  failed: 0,
  refused: 0,
  ...counts,
})
