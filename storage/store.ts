import { randomBytes } from 'node:crypto'
import { MailroomError } from '../errors.js'
import type {
  ElicitationModes,
  HoldEventData,
  HoldStore,
  PolicyStore,
  SendCountStore,
  SendPolicy,
  Hold,
} from './approval.js'
import type { InboundStore, InboundSummary } from './inbound.js'
import type { StsMode, TlsPolicyStore } from './tls-policy.js'

// MTA-STS policies and TLS-RPT counts (Store['tlsPolicy']).
export type { CachedStsPolicy, StsMode, TlsPolicyStore, TlsResultCount } from './tls-policy.js'

// Send policies and held messages (Store['policies'], ['sendCounts'], ['holds']).
export {
  type ApprovalMode,
  DEFAULT_POLICY,
  type ElicitationModes,
  type Hold,
  type HoldDecision,
  type HoldEventData,
  type HoldStatus,
  type HoldStore,
  holderKey,
  holderLabel,
  type NewHold,
  type PolicyHolder,
  type PolicyStore,
  type SendCountAnswer,
  type SendCountStore,
  type SendPolicy,
} from './approval.js'

// Received mail's records are part of the Store interface (Store['inbound']).
export type {
  AuthVerdict,
  InboundAddress,
  InboundAttachment,
  InboundMessage,
  InboundQuery,
  InboundRecipient,
  InboundStore,
  InboundSummary,
  Inbox,
  NewInboundMessage,
  ParsedInbound,
  ReceivingDomain,
  SummaryVerdict,
  ThreadEntry,
} from './inbound.js'

/**
 * The storage interface. SQLite (storage/sqlite/) is the embedded default; a server database
 * can implement the same interface. Every method is async so that one can.
 * Times are epoch milliseconds.
 */

export type OrderStatus = 'active' | 'canceled'
export type RuleType = 'domain' | 'email' | 'startswith' | 'destination'
export type BlockRule = 'LOCAL_BL_RCPT' | 'MBTRAP' | 'SUBJECT'

export interface Account {
  id: number
  name: string
  currency: string
  priceBase: number
  pricePerMessage: number
  /** Day of the month (1..28) on which a billing cycle starts. */
  billingDay: number
  createdAt: number
}

export interface ApiKeyInfo {
  id: number
  accountId: number
  prefix: string
  createdAt: number
  revokedAt: number | null
  /** A sandbox key: what it sends runs the whole pipeline but never leaves the machine. */
  sandbox: boolean
  /** Its send policy (docs/approval.md); null or absent: none. */
  policy?: SendPolicy | null
}

/** Who an API key speaks for. */
export interface KeyOwner {
  accountId: number
  /** A sandbox key: its sends are sandbox mail, whatever the order. */
  sandbox: boolean
  /** The key's id (its send policy's holder). */
  keyId?: number
  /** The key's send policy; null or absent: none. */
  policy?: SendPolicy | null
}

export interface MailOrder {
  id: number
  accountId: number
  status: OrderStatus
  comment: string | null
  /** Authorized senders (`user@example.com` or `@example.com`); empty = any sender. */
  senders: string[]
  createdAt: number
  /** A sandbox order: everything sent with it, over any door, is sandbox mail. */
  sandbox: boolean
  /** A bulk order: everything sent with it, over any door, carries a one-click unsubscribe link. */
  list?: boolean
  /** The order's send policy, which SMTP submission (no key) is held to; null or absent: none. */
  policy?: SendPolicy | null
}

export interface DenyRule {
  id: number
  orderId: number
  type: RuleType
  data: string
  createdAt: number
}

export type DkimAlgorithm = 'rsa' | 'ed25519'

/** One DKIM key of a sending domain. */
export interface DkimKey {
  domain: string
  accountId: number
  selector: string
  algorithm: DkimAlgorithm
  /** The `p=` value of its DNS record. */
  publicKey: string
  createdAt: number
}

/** A key that signs: its private key, decrypted (PKCS#8 PEM). */
export interface SigningKey extends DkimKey {
  privateKey: string
}

export interface NewMessage {
  txid: string
  accountId: number
  orderId: number
  envFrom: string
  recipients: string[]
  headerFrom: string | null
  replyTo: string | null
  subject: string | null
  messageId: string | null
  origin: string
  transtype: string
  interface: string
  sendingZone: string
  /**
   * The message's bytes in pieces, in order (most messages are one piece): a message received
   * over SMTP is kept as the chunks it arrived in rather than copied into one buffer.
   */
  raw: Buffer[]
  time: number
  /**
   * Sandbox mail (a sandbox key's or order's, or a report about sandbox mail): the delivery worker
   * records its outcomes without connecting to anyone (relay/sandbox.ts). Not sandbox when absent.
   */
  sandbox?: boolean
}

/** The size of a message in pieces. */
export const byteLength = (pieces: Buffer[]) => pieces.reduce((n, p) => n + p.length, 0)

/** Pieces as one Buffer: a single piece as it is, more joined into a copy. */
export const joinPieces = (pieces: Buffer[]): Buffer => (pieces.length === 1 ? pieces[0] : Buffer.concat(pieces))

/** A message's bytes are stored in parts of at most this size (a database copies each part it is given). */
export const BODY_PART_SIZE = 1024 * 1024
/** Pieces smaller than this are joined with their neighbours into one part. */
const BODY_PART_MIN = 64 * 1024

/**
 * The parts a message's pieces are stored as: each piece of at least 64 KB as it is (split at
 * 1 MB), smaller neighbours joined, so that the chunks of a large SMTP message are not copied
 * again and a message cut into many small pieces is not stored as many rows. Always one part at least.
 */
export function bodyParts(pieces: Buffer[]): Buffer[] {
  const parts: Buffer[] = []
  let small: Buffer[] = []
  let smallBytes = 0
  const flush = () => {
    if (small.length) parts.push(joinPieces(small))
    small = []
    smallBytes = 0
  }
  for (const piece of pieces) {
    for (let at = 0; at < piece.length; at += BODY_PART_SIZE) {
      const bytes = piece.subarray(at, at + BODY_PART_SIZE)
      if (bytes.length >= BODY_PART_MIN) {
        flush()
        parts.push(bytes)
      } else {
        small.push(bytes)
        smallBytes += bytes.length
        if (smallBytes >= BODY_PART_MIN) flush()
      }
    }
  }
  flush()
  return parts.length ? parts : [Buffer.alloc(0)]
}

/** The domain of an address, lower case. */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase()
}

export interface LogQuery {
  orderId: number
  origin?: string
  mx?: string
  from?: string
  to?: string
  subject?: string
  mailid?: string
  messageId?: string
  replyto?: string
  headerfrom?: string
  delivered?: 0 | 1
  /** Epoch seconds, inclusive. */
  startTime?: number
  endTime?: number
  skip: number
  limit: number
  dir: 'asc' | 'desc'
  groupby: 'message' | 'recipient'
}

/**
 * A delivery-log row, named as the contract's MailLogEntry where it holds the same value; times
 * are epoch values, which the tool writes in the contract's formats.
 */
export interface LogRow {
  _id: number
  id: string
  from: string
  to: string
  subject: string | null
  messageId: string | null
  /** When the message was accepted (ms). */
  createdAt: number
  /** The same, in epoch seconds. */
  time: number
  orderId: number
  transtype: string
  origin: string
  interface: string
  sendingZone: string | null
  bodySize: number | null
  seq: number | null
  delivered: number | null
  code: number | null
  recipient: string | null
  domain: string | null
  locked: number | null
  /** When the lease was taken or last renewed (ms). */
  lockTime: number | null
  assigned: string | null
  /** When the recipient was queued (ms). */
  queued: number
  mxHostname: string | null
  response: string | null
  /** 1 for sandbox mail (relay/sandbox.ts), which is never sent; else 0. */
  sandbox: number
}

export interface StatsQuery {
  orderIds: number[]
  /** Window start (ms), or null for all time. */
  since: number | null
  cycleStart: number
  cycleEnd: number
  /** How many entries each volume breakdown keeps. */
  top: number
}

export interface StatsResult {
  /** Messages accepted in the billing cycle, but sandbox mail (never sent, never billed). */
  usage: number
  received: number
  sent: number
  volume: { to: Record<string, number>; from: Record<string, number>; ip: Record<string, number> }
}

export interface BlockListEntry {
  source: 'external' | 'internal'
  kind: 'sender' | 'recipient'
  address: string
  reason: string
  createdAt: number
}

/** A recipient on an account's suppression list (the local block list). */
export interface Suppression {
  address: string
  reason: string
  /** When it was put there (ms). */
  createdAt: number
  /** The transaction id of the message whose bounce put it there; null when nothing did (the operator). */
  txid: string | null
}

/** What an unsubscribe link names: one recipient of one message of an account. */
export interface UnsubscribeLink {
  accountId: number
  address: string
  txid: string
}

/** The unsubscribe token's sealed form, as short as it can be: [accountId, txid, address]. */
export function unsubscribeLinkOf(value: unknown): UnsubscribeLink | undefined {
  if (!Array.isArray(value) || value.length !== 3) return undefined
  const [accountId, txid, address] = value
  if (!Number.isSafeInteger(accountId) || typeof txid !== 'string' || typeof address !== 'string') return undefined
  return { accountId, txid, address }
}

export interface BlockEvent {
  rule: BlockRule
  createdAt: number
  envFrom: string
  messageId: string | null
  subject: string
  rcptTo: string
}

/** A recipient delivery leased by a worker. */
export interface QueueItem {
  /** The delivery row (`_id`). */
  id: number
  /** The message row. */
  messageRowId: number
  txid: string
  accountId: number
  orderId: number
  envFrom: string
  recipient: string
  domain: string
  attempts: number
  /** When the message was accepted (ms). */
  queuedAt: number
  /** Whether the sender was already sent a `delayed` report about this recipient. */
  delayReported: boolean
  /** Sandbox mail: never sent, its outcome decided by relay/sandbox.ts. */
  sandbox: boolean
  /** The message's subject and Message-ID, for its webhook events. */
  subject?: string | null
  messageId?: string | null
}

/** The result of one delivery attempt for one row. */
export interface AttemptOutcome {
  id: number
  state: 'delivered' | 'deferred' | 'failed'
  code: number | null
  response: string
  mxHostname: string | null
  /** The address the attempt connected to, when it connected. */
  mxAddress?: string | null
  /** Whether that connection was encrypted (STARTTLS); null when there was none. */
  tls?: boolean | null
  /** The MTA-STS mode applied (RFC 8461); null when no policy was looked up (sandbox, local, smarthost). */
  tlsPolicy?: StsMode | null
  /** The domain whose policy it was. */
  tlsPolicyDomain?: string | null
  /** Whether the MX certificate was valid for its name (a trusted chain, the name matched); null without TLS. */
  certValid?: boolean | null
  /** When to try again (deferred only). */
  nextAttemptAt: number | null
  /** When the attempt ended (ms). */
  time: number
  /** A failure that put the recipient on the account's suppression list. */
  suppressed?: boolean
}

/**
 * One entry of a recipient's history: a delivery attempt, or the operator's cancel (`failed`,
 * with the cancel's response and no reply code).
 */
export interface AttemptRecord {
  /** When it ended (ms). */
  time: number
  state: 'delivered' | 'deferred' | 'failed'
  code: number | null
  response: string | null
  mxHostname: string | null
  mxAddress: string | null
  tls: boolean | null
  /** Deferred: when it is tried again (ms). */
  nextAttemptAt: number | null
  /** It put the recipient on the account's suppression list. */
  suppressed: boolean
  /** The MTA-STS mode applied, and whose policy it was; null when none was looked up (a cancel, sandbox, local mail, a smarthost). */
  tlsPolicy: StsMode | null
  tlsPolicyDomain: string | null
  /** Whether the MX certificate was valid for its name; null without TLS. */
  certValid: boolean | null
}

/** One recipient of a message, with every attempt made for it, oldest first. */
export interface RecipientHistory {
  recipient: string
  state: 'queued' | 'deferred' | 'delivered' | 'failed' | 'held' | 'rejected'
  /** Delivery attempts made (a cancel is none). */
  attempts: number
  /** When it is due next (ms); null once final. */
  nextAttemptAt: number | null
  /** Whether the address is on the account's suppression list now, whatever put it there. */
  listed: boolean
  /**
   * Its entry there when this message put it there other than by an attempt's failure (its
   * unsubscribe link, a complaint about it): why and when; else null.
   */
  listedBy: { reason: string; time: number } | null
  history: AttemptRecord[]
}

/** A recipient's entry on its account's suppression list, as a message's history reads it. */
export type ListEntry = { reason: string; time: number; txid: string | null }

/** RecipientHistory's listedBy: the entry if the message `txid` made it. */
export const listedBy = (entry: ListEntry | undefined, txid: string) =>
  entry && entry.txid === txid ? { reason: entry.reason, time: entry.time } : null

/** A message of the log with its recipients' histories (getMessage). */
export interface MessageHistory {
  /** The message's row: where queue.body finds its bytes while they are kept. */
  rowId: number
  txid: string
  orderId: number
  envFrom: string
  headerFrom: string | null
  replyTo: string | null
  subject: string | null
  messageId: string | null
  bodySize: number
  origin: string
  transtype: string
  interface: string
  /** When it was accepted (ms). */
  createdAt: number
  sandbox: boolean
  /** In the order of the envelope. */
  recipients: RecipientHistory[]
  /** Its hold, when it was held for approval. */
  hold?: Hold | null
}

/** What the volume index counts, per mail order and hour. */
export const VOLUME_COUNTS = ['accepted', 'delivered', 'deferred', 'failed', 'refused'] as const
export type VolumeCounts = Record<(typeof VOLUME_COUNTS)[number], number>

export const HOUR_MS = 3_600_000
export const DAY_MS = 24 * HOUR_MS
/** The length of a bucket of getVolume (epoch hours and days are UTC's). */
export const BUCKET_MS = { hour: HOUR_MS, day: DAY_MS } as const
/** The start of the UTC hour of a time (ms): the volume index's bucket. */
export const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS

export interface VolumeQuery {
  orderIds: number[]
  /** The window (ms), from its first bucket's start, inclusive, to its last one's end, exclusive. */
  from: number
  to: number
  /** Hours, or UTC days. */
  interval: 'hour' | 'day'
}

/** One bucket of the volume: counts of the hour or day starting at `time` (ms). */
export type VolumeBucket = VolumeCounts & { time: number }

/**
 * A send refused by a deny rule or the spam filter (over SMTP, a refused MAIL FROM or RCPT TO):
 * counted in its order's volume, and told to the account's webhooks (`events`, message.refused)
 * in the same commit.
 */
export interface RefusedSend {
  orderId: number
  time: number
  events: WebhookEvent[]
}

/** A new `webhook-id` (Standard Webhooks): unique per event, the same on every attempt and endpoint. */
export const newEventId = () => `msg_${randomBytes(16).toString('base64url')}`

/** What a webhook can be told about (the `type` of an event). */
export const WEBHOOK_EVENT_TYPES = [
  'message.accepted',
  'message.delivered',
  'message.deferred',
  'message.failed',
  'message.refused',
  'message.received',
  'message.held',
  'message.approved',
  'message.rejected',
  'recipient.unsubscribed',
  'recipient.complained',
] as const
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number]

/** One event of an account, as its webhooks receive it in `data`. */
export interface WebhookEventData {
  /** The message's transaction id; null for a refusal (nothing was queued). */
  transactionId: string | null
  /** The recipient it is about; null for a refusal of the whole message (its sender or subject). */
  recipient: string | null
  from: string
  subject: string | null
  messageId: string | null
  /** The destination's (or, for a refusal, mailroom's) SMTP reply code, when there is one. */
  code: number | null
  response: string | null
  mxHost: string | null
  /** The delivery attempt (1 for the first); 0 before any. */
  attempt: number
  /** message.failed: whether the recipient was put on the account's suppression list by this failure. */
  suppressed?: boolean
}

/** recipient.unsubscribed and recipient.complained: a recipient the account's mail no longer goes to. */
export interface RecipientEventData {
  recipient: string
  /** The message whose unsubscribe link was used, or that the complaint is about; null when unknown. */
  transactionId: string | null
  /** unsubscribed: `one-click` (a receiver's POST, RFC 8058) or `page` (a person confirmed it on the page). complained: the report's Feedback-Type (RFC 5965), as `abuse`. */
  via: string
}

/**
 * An event to tell the account's webhooks that subscribe to its type: written to the outbox in
 * the transaction of the change it reports, and only for an account that has such a webhook.
 */
export interface WebhookEvent {
  /** The `webhook-id` every endpoint gets for it, on every attempt. */
  id: string
  type: WebhookEventType
  accountId: number
  /** When it happened (ms). */
  time: number
  /** message.received: the received message's summary and the new part of its text; message.held, .approved, .rejected: the hold. */
  data: WebhookEventData | InboundSummary | HoldEventData | RecipientEventData
  /**
   * With queue.record: the delivery row whose outcome it reports. It is written only if the row
   * was recorded in that transaction (an outcome recorded twice is reported once).
   */
  row?: number
}

/** A webhook endpoint of an account. */
export interface Webhook {
  id: number
  accountId: number
  url: string
  events: WebhookEventType[]
  description: string | null
  createdAt: number
  /** Since when every attempt failed (ms), or null when the last one succeeded. */
  failingSince: number | null
  lastError: string | null
  lastErrorAt: number | null
  /** When it was disabled for failing too long, or null while it is enabled. */
  disabledAt: number | null
}

/** An event leased by a webhook worker, with what it needs to send it. */
export interface OutboxItem {
  /** The outbox row. */
  id: number
  webhookId: number
  accountId: number
  url: string
  /** The signing secret, `whsec_…`, decrypted. */
  secret: string
  /** The `webhook-id`. */
  eventId: string
  type: WebhookEventType
  /** The request body, exactly as signed. */
  payload: string
  /** Attempts made before this one. */
  attempts: number
  /** The webhook's failingSince when it was claimed. */
  failingSince: number | null
}

/** The result of one attempt to send an outbox row. */
export interface OutboxResult {
  id: number
  webhookId: number
  /** The endpoint answered 2xx: the row goes. */
  ok: boolean
  /** Why it failed (not ok). */
  error?: string
  /** When to try again (not ok); null drops the row. */
  nextAttemptAt: number | null
  /** Disable the webhook (failing for too long); its rows go. */
  disable?: boolean
  now: number
}

/**
 * A report to a message's sender (RFC 3464) about some of its recipients, queued in the commit that
 * records their outcomes: it is neither lost nor sent twice, whenever the process stops.
 */
export interface SenderReport {
  /**
   * The delivery rows it reports on: it is queued only if each of them was still waiting when
   * recorded (a row already final was recorded, and reported, by another attempt) and, for a
   * `delayed` report, none was reported delayed before; those are then marked as reported.
   */
  rows: number[]
  action: 'failed' | 'delayed'
  message: NewMessage
}

/** One recipient of a message, as a report that comes back about it later needs it. */
export interface DeliveryRef {
  /** The delivery row. */
  id: number
  txid: string
  accountId: number
  orderId: number
  recipient: string
  state: RecipientHistory['state']
  envFrom: string
  subject: string | null
  messageId: string | null
  attempts: number
}

/** A recipient still to deliver, as the operator sees it in the queue. */
export interface WaitingRecipient {
  /** The delivery row (`_id`). */
  id: number
  txid: string
  accountId: number
  recipient: string
  /** `queued`: not tried yet; `deferred`: tried, to be tried again; `in flight`: a worker holds it now. */
  state: 'queued' | 'deferred' | 'in flight'
  /** When the message was accepted (ms). */
  queuedAt: number
  attempts: number
  /** The last attempt's reply, if there was one. */
  code: number | null
  response: string | null
  /** When it is due (ms); a row in flight is being tried. */
  nextAttemptAt: number
  /** The node whose worker holds it (in flight only). */
  node: string | null
}

/** What an operator's change to the queue did. */
export interface QueueChange {
  /** Recipients changed. */
  changed: number
  /** Recipients left to the worker that holds them at the moment. */
  inFlight: number
}

/**
 * What `idempotency.begin` found for an account's key (the IETF Idempotency-Key header draft):
 * `claimed`: the key was free and is now the caller's, who runs the request and then records its
 * response (`finish`) or releases the key (`abandon`); `pending`: another request with the key is
 * under way; `mismatch`: the key was used for a different request; `done`: the key's request was
 * answered, and this is its response.
 */
export type IdempotencyClaim =
  | { state: 'claimed' }
  | { state: 'pending' }
  | { state: 'mismatch' }
  | { state: 'done'; status: number; body: string }

/** One account's idempotency key, as the claim `token` holds it. */
export interface IdempotencyHold {
  accountId: number
  key: string
  token: string
}

/** A client registered by OAuth Dynamic Client Registration (RFC 7591): a public client (PKCE, no secret). */
export interface OAuthClient {
  /** The `client_id` mailroom gave it. */
  id: string
  name: string | null
  /** The redirect URIs it registered, matched exactly (a loopback one with any port). */
  redirectUris: string[]
  /** The client address it registered from (registrations are limited per address). */
  registeredFrom: string
  createdAt: number
}

/** What an authorization code stands for, until it is exchanged (kept by the hash of the code). */
export interface OAuthCode {
  accountId: number
  clientId: string
  clientName: string | null
  /** Where the code was sent. */
  redirectUri: string
  /** Whether the authorization request named redirectUri: the token request must then name it too (RFC 6749 §4.1.3). */
  redirectUriNamed: boolean
  /** The PKCE S256 challenge (RFC 7636). */
  codeChallenge: string
  scopes: string[]
  /** The resource indicator (RFC 8707) the tokens are bound to. */
  resource: string
  /** Allowed with a sandbox key: its tokens send sandbox mail only. */
  sandbox: boolean
  /** The send policy of the key that allowed it, which its grant keeps; null or absent: none. */
  policy?: SendPolicy | null
  expiresAt: number
}

/** An account's authorization of a client, which its access and refresh tokens belong to. */
export interface OAuthGrant {
  id: number
  accountId: number
  clientId: string
  clientName: string | null
  scopes: string[]
  resource: string
  sandbox: boolean
  /** Its send policy (the authorizing key's, unless set for the grant); null or absent: none. */
  policy?: SendPolicy | null
  createdAt: number
  /** When tokens were last issued for it (the code's exchange, or a refresh). */
  refreshedAt: number
}

/** A new access token and refresh token, by their hashes (the tokens themselves are never stored). */
export interface OAuthTokenHashes {
  access: { hash: string; expiresAt: number }
  refresh: { hash: string; expiresAt: number }
}

/** A code to exchange (see `oauth.exchangeCode`). */
export interface OAuthExchangeInput<R> {
  hash: string
  tokens: OAuthTokenHashes
  now: number
  /** Why the code cannot be exchanged (expired, another client, the PKCE verifier…), or undefined. */
  refuse: (code: OAuthCode) => R | undefined
}

/** What `oauth.exchangeCode` did with a code (see there). */
export type OAuthExchange<R> =
  | { state: 'granted'; grant: OAuthGrant }
  | { state: 'refused'; refusal: R }
  | { state: 'reused' | 'unknown' }

/** What `oauth.refresh` did with a refresh token (see there). */
export type OAuthRefresh =
  | { state: 'rotated'; grant: OAuthGrant }
  | { state: 'reused' | 'expired' | 'mismatch' | 'unknown' }

/** An MCP session as the store keeps it: whose it is, and when it was last used. */
export interface McpSession {
  accountId: number
  usedAt: number
  /** The elicitation modes its client declared at initialize; null: none. */
  elicitation?: ElicitationModes | null
}

/** A running `mailroom serve`, as its last heartbeat tells (see Store['servers']). */
export interface ServerHeartbeat {
  /** The process's own id, new at each start. */
  id: string
  /** Its MAILROOM_NODE_NAME. */
  node: string
  /** The base address its clients use. */
  url: string
  /** Where it delivers mail, in words: a smarthost, its sink, or the recipients' MX hosts. */
  delivery: string
  /** When it last said it runs. */
  beatAt: number
}

export interface Store {
  accounts: {
    create(input: Omit<Account, 'id'>): Promise<Account>
    get(id: number): Promise<Account | undefined>
    list(): Promise<Account[]>
    /**
     * The first start's account, on an empty database only: the account, one API key (returned in
     * full) and one active order (any sender), in one transaction that concurrent callers (other
     * processes, other nodes) take one at a time. Undefined, and nothing made, once any account exists.
     */
    createFirst(input: {
      account: Omit<Account, 'id'>
      orderComment: string
    }): Promise<{ account: Account; apiKey: string; order: MailOrder; password: string } | undefined>
  }
  apiKeys: {
    /** Creates a key (a sandbox key with `sandbox`) and returns it in full: the only time it can be seen. */
    create(accountId: number, now: number, options?: { sandbox?: boolean }): Promise<{ info: ApiKeyInfo; key: string }>
    /** The account of an unrevoked key, or undefined. */
    authenticate(key: string): Promise<number | undefined>
    /** The account of an unrevoked key and whether it is a sandbox key, or undefined. */
    owner(key: string): Promise<KeyOwner | undefined>
    list(accountId: number): Promise<ApiKeyInfo[]>
    /** Revokes by id or by prefix; true when a live key was revoked. */
    revoke(idOrPrefix: number | string, now: number): Promise<boolean>
  }
  orders: {
    create(input: {
      accountId: number
      comment: string | null
      senders: string[]
      now: number
      /** A sandbox order; not one when absent. */
      sandbox?: boolean
      /** A bulk order (one-click unsubscribe); not one when absent. */
      list?: boolean
    }): Promise<{ order: MailOrder; password: string }>
    get(id: number): Promise<MailOrder | undefined>
    /** Every order of the account, active and canceled, by id. */
    list(accountId: number): Promise<MailOrder[]>
    /** The decrypted SMTP password. */
    password(id: number): Promise<string>
    /** Replaces the SMTP password with a new generated one, returned: the old one no longer logs in. */
    rotatePassword(id: number): Promise<string>
    setStatus(id: number, status: OrderStatus): Promise<boolean>
    addSender(id: number, pattern: string): Promise<boolean>
    removeSender(id: number, pattern: string): Promise<boolean>
  }
  rules: {
    list(orderIds: number[]): Promise<DenyRule[]>
    /** Returns the existing rule when the same one exists. */
    create(input: { orderId: number; type: RuleType; data: string; now: number }): Promise<DenyRule>
    /** Deletes the rule if it belongs to one of orderIds. */
    delete(id: number, orderIds: number[]): Promise<boolean>
  }
  mail: {
    /**
     * Stores the message, its body and one queued delivery row per recipient, in one transaction.
     * With `lease`, the rows are leased to that node in the same transaction and returned: a
     * worker with room starts them without claiming them from the queue.
     */
    enqueue(
      message: NewMessage,
      lease?: { node: string; now: number },
    ): Promise<{ rowId: number; leased?: QueueItem[] }>
    log(query: LogQuery): Promise<{ total: number; rows: LogRow[] }>
    stats(query: StatsQuery): Promise<StatsResult>
    /** A message of the account by its transaction id, with its recipients' histories; undefined when it has none by that id. */
    message(txid: string, accountId: number): Promise<MessageHistory | undefined>
    /**
     * Which of these addresses, and which of their domains (lower case), the account (any of its
     * orders) has a released delivery to: any state but held or rejected.
     */
    sentBefore(accountId: number, recipients: string[]): Promise<{ addresses: Set<string>; domains: Set<string> }>
    /**
     * The counts of the orders' volume index in a window, summed per hour or UTC day: the buckets
     * with anything counted, oldest first. Recipients accepted, attempts delivered, deferred and
     * failed (a cancel's failure too) and sends refused, each in the bucket of when it happened.
     */
    volume(query: VolumeQuery): Promise<VolumeBucket[]>
    /** Counts a refused send and writes its webhook events, in one commit; resolves with the outbox rows written. */
    refuse(refusal: RefusedSend): Promise<number>
  }
  queue: {
    /**
     * Leases up to `limit` rows that are due (their next attempt time has come) and not leased,
     * or whose lease is older than `leaseMs`: a worker that died loses its rows to the next one.
     */
    claim(input: { node: string; now: number; leaseMs: number; limit: number }): Promise<QueueItem[]>
    /** The bytes of a queued message, or undefined once every recipient is final. */
    body(messageRowId: number): Promise<Buffer | undefined>
    /**
     * Records attempt outcomes and releases their leases; drops bodies no recipient still needs.
     * A row already final (delivered or failed) is left as it is. `reports` are queued in the
     * same transaction, each as its conditions allow (see SenderReport); resolves with the
     * transaction ids of those queued.
     */
    record(outcomes: AttemptOutcome[], reports?: SenderReport[], events?: WebhookEvent[]): Promise<string[]>
    /** A delivery row, as a report about it after the fact (a late bounce, a complaint) needs it. */
    delivery(id: number): Promise<DeliveryRef | undefined>
    /**
     * A failure reported after the destination took the message (a late bounce, RFC 3464): the
     * delivered row `id` becomes failed, its history ends with the report's entry (`code`,
     * `response`, `suppressed`), the volume counts a failure in the hour of `time`, and `events`
     * are written, in one commit. False, and nothing written, when the row is not delivered
     * (unknown, still to deliver, or failed already: a report told twice counts once).
     */
    lateFailure(input: {
      id: number
      time: number
      code: number | null
      response: string
      suppressed: boolean
      events: WebhookEvent[]
    }): Promise<boolean>
    /**
     * The local part of a delivery row's return path (VERP) at `domain`: its id and a MAC of the
     * domain, sealed under a key derived from the server secret (the id is not shown), short
     * enough for an address (RFC 5321 §4.5.3.1.1: 64 octets) and of one case, since a bounce may
     * come back lowercased.
     */
    returnPathToken(rowId: number, domain: string): string
    /** The delivery row a return path names; undefined for one mailroom did not make for that domain. */
    openReturnPathToken(local: string, domain: string): number | undefined
    /** Releases every lease a node holds (its previous process is gone); returns how many. */
    release(node: string): Promise<number>
    /**
     * Renews every lease a node holds, as of `now`: rows a live worker holds, waiting or in
     * delivery however long, are never taken for a dead worker's, by others or by itself.
     */
    renew(node: string, now: number): Promise<number>
    /** Rows still to deliver (queued or deferred). */
    pending(): Promise<number>
    /**
     * For monitoring: the rows still to deliver (as pending() counts them), and when the message of
     * the oldest of them (the first queued) was accepted, or null when none waits.
     */
    depth(): Promise<{ recipients: number; oldestQueuedAt: number | null }>
    /**
     * Recipients still to deliver, oldest first; of one account when given. A row whose lease is
     * younger than `leaseMs` is in flight.
     */
    waiting(input: { accountId?: number; now: number; leaseMs: number }): Promise<WaitingRecipient[]>
    /**
     * Makes the waiting recipients of a transaction (without `txid`, every one) due at `now`. A
     * row a worker holds (a lease younger than `leaseMs`) is left to it. Undefined for an unknown txid.
     */
    retry(input: { txid?: string; now: number; leaseMs: number }): Promise<QueueChange | undefined>
    /**
     * Fails the waiting recipients of a transaction, for good, with `response`, and drops the
     * message's bytes once every recipient is final. A row a worker holds is left to it, and a
     * final row is never written again. Undefined for an unknown txid.
     */
    cancel(input: { txid: string; now: number; leaseMs: number; response: string }): Promise<QueueChange | undefined>
  }
  blocks: {
    events(accountId: number, rule: BlockRule, since: number): Promise<BlockEvent[]>
    /** `{from, subject}` pairs with more than `threshold` SUBJECT events since `since`. */
    subjectPairs(accountId: number, since: number, threshold: number): Promise<{ from: string; subject: string }[]>
    addEvent(accountId: number, event: BlockEvent): Promise<void>
    /**
     * Puts an address on a list of the account; true when it was not there yet. `events` (an
     * unsubscribe's, a complaint's) are written to the outbox in the same commit, and only then.
     */
    addToList(input: {
      accountId: number
      source: 'external' | 'internal'
      kind: 'sender' | 'recipient'
      address: string
      reason: string
      now: number
      /** The message whose bounce (unsubscribe link, complaint) put it there. */
      txid?: string
      events?: WebhookEvent[]
    }): Promise<boolean>
    /**
     * The token of a recipient's unsubscribe link (RFC 8058) in a message of the account, sealed
     * with a key derived from the server secret: the same on every node, unforgeable without it.
     */
    unsubscribeToken(link: UnsubscribeLink): string
    /** What a token stands for; undefined for one mailroom did not make (forged, altered, cut short). */
    openUnsubscribeToken(token: string): UnsubscribeLink | undefined
    /**
     * Removes the address from all three stores for the account: its list entries, the events it
     * is the sender of, and the LOCAL_BL_RCPT events of mail refused to it; returns how many records went.
     */
    delist(accountId: number, address: string): Promise<number>
    /** Why a sender is blocked for the account (external or internal list), if it is. */
    blockedSender(accountId: number, address: string): Promise<BlockListEntry | undefined>
    /** Why a recipient is on the account's local block list (suppressed), if it is. */
    suppressed(accountId: number, address: string): Promise<BlockListEntry | undefined>
    /** The account's recipients suppressed with `reason` since `since`, newest first, at most `limit`. */
    suppressedFor(accountId: number, reason: string, since: number, limit: number): Promise<Suppression[]>
    /** A page of the account's suppressed recipients, newest first, and how many there are. */
    suppressions(
      accountId: number,
      page: { skip: number; limit: number },
    ): Promise<{ total: number; rows: Suppression[] }>
    /**
     * Counts a message with a spam-indicative subject, atomically: when the sender has sent that
     * subject more than `threshold` times since `since`, records nothing and answers false; else
     * records a SUBJECT event and answers true.
     */
    takeSubject(accountId: number, event: Omit<BlockEvent, 'rule'>, since: number, threshold: number): Promise<boolean>
    /** Entries of the external and internal lists of an account, of one kind. */
    listEntries(accountId: number, kind: 'sender' | 'recipient'): Promise<BlockListEntry[]>
    /** Removes one list entry; true when it was there. */
    removeFromList(accountId: number, address: string, kind: 'sender' | 'recipient'): Promise<boolean>
    /** Deletes spam-filter events older than `before`; returns how many. */
    prune(before: number): Promise<number>
  }
  traps: {
    /** Adds an address or `@domain`; false when it was there. */
    add(pattern: string, now: number): Promise<boolean>
    remove(pattern: string): Promise<boolean>
    list(): Promise<string[]>
    /** The trap an address falls into (itself or its `@domain`), if any. */
    match(address: string): Promise<string | undefined>
  }
  domains: {
    /**
     * Adds a key to a domain, creating the domain for the account when new. Throws, adding
     * nothing, when another account has the domain or the domain has the selector already.
     */
    addKey(input: Omit<SigningKey, 'createdAt'> & { now: number }): Promise<DkimKey>
    /** The account's keys, by domain then age. */
    list(accountId: number): Promise<DkimKey[]>
    /** A domain's keys, oldest first, whichever account it belongs to; empty when nobody has it. */
    keys(domain: string): Promise<DkimKey[]>
    /** The key that signs a domain's mail (its oldest), decrypted; undefined when nobody has it. */
    signingKey(domain: string): Promise<SigningKey | undefined>
    /** Removes one key, or with no selector the domain and all its keys; the last key takes the domain with it. */
    remove(domain: string, selector?: string): Promise<boolean>
  }
  /**
   * Failed authentications per client (its address and door, as the caller names it), one count
   * for every node: a client that keeps guessing is refused for the rest of its window.
   */
  authFailures: {
    /**
     * When the client's throttle ends (ms), if it has been throttled in its current or a past
     * window (the caller compares with now). Answered from the settings cache: a throttle started
     * on another node is seen within the cache's delay.
     */
    throttledUntil(client: string): Promise<number | undefined>
    /**
     * Counts a failure at `now`, atomically across nodes: the client's window is `windowMs` from
     * its first failure (a failure after it starts a new one). From the `max`-th failure in the
     * window the client is throttled until the window ends. Answers the count and that end.
     */
    fail(input: {
      client: string
      now: number
      windowMs: number
      max: number
    }): Promise<{ count: number; throttledUntil: number | null }>
    /** Deletes the counts of windows that began before `before`; returns how many. */
    sweep(before: number): Promise<number>
  }
  idempotency: {
    /**
     * Claims `key` of the account for a request with `fingerprint`, atomically across connections
     * and nodes: when no entry holds the key, or its entry was created before `expiredBefore`, or
     * is still pending and was created before `staleBefore` (its request died), the key is recorded
     * as pending under `token`, created `now`, and the answer is `claimed`. Otherwise the entry
     * answers: `mismatch` when its fingerprint differs, else `pending` or `done`.
     */
    begin(
      input: IdempotencyHold & {
        fingerprint: string
        now: number
        expiredBefore: number
        staleBefore: number
      },
    ): Promise<IdempotencyClaim>
    /** Records the response of the request `token` claimed; false when the claim was lost meanwhile (taken over, swept). */
    finish(input: IdempotencyHold & { status: number; body: string }): Promise<boolean>
    /** Frees the key the request `token` claimed, while still pending; false when the claim was lost. */
    abandon(input: IdempotencyHold): Promise<boolean>
    /** Deletes the entries created before `before`, answered or not; returns how many. */
    sweep(before: number): Promise<number>
  }
  webhooks: {
    /** Writes events that go with no other change (a complaint about a recipient suppressed already) to the outbox. */
    emit(events: WebhookEvent[]): Promise<void>
    /** Adds an endpoint; `secret` (`whsec_…`) is stored encrypted. */
    create(input: {
      accountId: number
      url: string
      events: WebhookEventType[]
      description: string | null
      secret: string
      now: number
    }): Promise<Webhook>
    /** The account's webhooks, by id. */
    list(accountId: number): Promise<Webhook[]>
    /** Deletes a webhook of the account and the events still waiting for it; false when it has none by that id. */
    delete(id: number, accountId: number): Promise<boolean>
    /** Whether the account has an enabled webhook for the type (answered from the settings cache). */
    subscribed(accountId: number, type: WebhookEventType): Promise<boolean>
    /**
     * Leases due outbox rows of enabled webhooks, as queue.claim leases deliveries; none of the
     * webhooks or accounts in `skip` (those the caller already has enough posts in flight for).
     */
    claim(input: {
      node: string
      now: number
      leaseMs: number
      limit: number
      skip?: { webhooks: number[]; accounts: number[] }
    }): Promise<OutboxItem[]>
    /** Records attempts: a sent row goes, a failed one waits for its next attempt or goes; the webhook's state follows. */
    record(results: OutboxResult[]): Promise<void>
    /** Releases the outbox leases a node holds: all of them, or those of the rows `ids`. */
    release(node: string, ids?: number[]): Promise<number>
    /** Renews the outbox leases a node holds. */
    renew(node: string, now: number): Promise<number>
    /** Outbox rows waiting to be sent. */
    pending(): Promise<number>
  }
  oauth: {
    /**
     * Registers a client, unless its address registered `perAddress` clients since `since` or
     * `total` clients are registered: then answers which limit it hit, and stores nothing.
     */
    register(
      client: OAuthClient,
      limits: { since: number; perAddress: number; total: number },
    ): Promise<'registered' | 'address' | 'total'>
    client(id: string): Promise<OAuthClient | undefined>
    /** Keeps an authorization code by its hash. */
    addCode(hash: string, code: OAuthCode): Promise<void>
    /**
     * Exchanges a code, once, in one transaction: the first call marks it used (right or wrong)
     * and, unless `refuse(code)` answers why not, makes its grant with its first `tokens`:
     * `granted`, or `refused` with that answer. Any later call revokes the grant made from it
     * (OAuth 2.1 §4.1.3) and answers `reused`; one made while the first is under way waits for
     * it, so a grant is never made after its code was reused. `refuse` runs inside the
     * transaction: synchronous, and without effects.
     */
    exchangeCode<R>(input: OAuthExchangeInput<R>): Promise<OAuthExchange<R>>
    /** The grant of an access token and when the token expires, or undefined (unknown, or its grant revoked). */
    accessToken(hash: string): Promise<{ grant: OAuthGrant; expiresAt: number } | undefined>
    /**
     * Rotates a refresh token, atomically: `rotated` (it is spent, `tokens` are the grant's new
     * ones); `reused` when it was spent already (the grant is revoked: someone else holds a copy);
     * `expired`; `mismatch` when the grant is another client's or another resource's (nothing
     * changes); `unknown`.
     */
    refresh(input: {
      hash: string
      clientId: string
      resource: string
      tokens: OAuthTokenHashes
      now: number
    }): Promise<OAuthRefresh>
    /** The account's grants, by id. */
    grants(accountId: number): Promise<OAuthGrant[]>
    /** Revokes a grant and every token of it; false when there is none by that id. */
    revoke(grantId: number): Promise<boolean>
    /**
     * Deletes what can no longer be used: codes and tokens expired before `now`, and registered
     * clients created before `unusedBefore` that have no grant. Returns how many rows went.
     */
    sweep(now: number, unusedBefore: number): Promise<number>
  }
  mcpSessions: {
    /**
     * Records a session of the account, used `now`, then ends the account's sessions beyond the
     * `keep` most recently used. Returns how many it ended.
     */
    open(input: {
      id: string
      accountId: number
      now: number
      keep: number
      elicitation?: ElicitationModes | null
    }): Promise<number>
    /** The session by its id, or undefined (never opened, ended, or swept). */
    get(id: string): Promise<McpSession | undefined>
    /** Records that the session was used `now`. */
    touch(id: string, now: number): Promise<void>
    /** Ends a session; false when there is none by that id. */
    end(id: string): Promise<boolean>
    /** Deletes the sessions last used before `before`; returns how many. */
    sweep(before: number): Promise<number>
  }
  /**
   * The `mailroom serve` processes running on this database: each renews its row while it runs,
   * so that a `mailroom stdio` on the same database leaves delivery to them rather than deliver
   * with settings of its own. The row of one that died stops being renewed and ages out.
   */
  servers: {
    /** Records that the server runs, `now`: its row is made at the first beat, renewed by the next. */
    beat(server: Omit<ServerHeartbeat, 'beatAt'>, now: number): Promise<void>
    /** The servers whose last beat is at or after `since`, the most recent first. */
    running(since: number): Promise<ServerHeartbeat[]>
    /** Deletes the server's row: it stopped. */
    end(id: string): Promise<void>
    /** Deletes the rows of servers last heard of before `before` (they died); returns how many. */
    sweep(before: number): Promise<number>
  }
  /** Received mail: receiving domains, inboxes, messages and threads (storage/inbound.ts). */
  inbound: InboundStore
  /** Send policies of keys, grants and orders (storage/approval.ts). */
  policies: PolicyStore
  /** The counters of the policies' rate limits, shared by every node. */
  sendCounts: SendCountStore
  /** Messages held for a person's approval. */
  holds: HoldStore
  /** MTA-STS policies and TLS-RPT counts, shared by every node (storage/tls-policy.ts). */
  tlsPolicy: TlsPolicyStore
  /** Housekeeping the database wants from time to time (SQLite: refresh the planner's statistics). */
  maintain(): Promise<void>
  /**
   * Writes a consistent copy of the database to `file`, readable by its owner only, while
   * others go on writing. A file that exists is refused, never overwritten.
   */
  backup(file: string): Promise<void>
  /** Resolves when the database can be written now; else rejects with the reason (for /readyz). */
  writable(): Promise<void>
  close(): Promise<void>
}

/** MAILROOM_LOG_READ_TIMEOUT's default, for stores opened without the configuration (the CLI's tools, tests). */
export const LOG_READ_TIMEOUT = 10_000

/** The answer to a read of the log or the statistics stopped at its deadline (MAILROOM_LOG_READ_TIMEOUT). */
export const logReadTimedOut = (timeoutMs: number) =>
  new MailroomError(
    503,
    `reading the log took longer than ${timeoutMs / 1000}s and was stopped; narrow the search (exact filters, a shorter date window, a smaller page)`,
  )
