import type { SMTPServerAddress, SMTPServerDataStream } from 'smtp-server'
import { domainToASCII } from 'node:url'
import { BODY_PART_SIZE } from '../storage/store.js'
import { canonicalAddress, isAscii } from './addresses.js'
import type { Reservation } from './byte-budget.js'

// What the SMTP doors (submission, and the MX door of relay/inbound/) share: the count of
// connections per client, envelope addresses as the relay keeps them, replies, and the buffer a
// message's bytes arrive in.

/** An error smtp-server answers with the given reply code. */
export const reply = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code })

/**
 * SMTP connections open per client (authClient), so that one address cannot hold every slot of
 * MAILROOM_SMTP_MAX_CLIENTS and lock everyone else out, as Postfix's
 * smtpd_client_connection_count_limit does. A client's count is dropped when it has none open.
 */
export function connectionCounter(max: number) {
  const open = new Map<string, number>()
  return {
    /** Counts a new connection of the client and returns true, or returns false when it already has `max` open. */
    take(client: string): boolean {
      const n = open.get(client) ?? 0
      if (n >= max) return false
      open.set(client, n + 1)
      return true
    },
    release(client: string): void {
      const n = open.get(client) ?? 0
      if (n <= 1) open.delete(client)
      else open.set(client, n - 1)
    },
  }
}

export type ConnectionCounter = ReturnType<typeof connectionCounter>

/**
 * An envelope address as the relay keeps it: its domain in ASCII (smtp-server hands over a
 * punycode domain, xn--…, turned into Unicode, which is not what the client sent and not what the
 * MX expects), and a quoted local part in its canonical form (canonicalAddress).
 */
export function envelopeAddress(address: string): string {
  const at = address.lastIndexOf('@')
  const ascii =
    at < 0 || isAscii(address)
      ? address
      : `${address.slice(0, at)}@${domainToASCII(address.slice(at + 1)) || address.slice(at + 1)}`
  return canonicalAddress(ascii)
}

/** RFC 3463 §3.4: X.3.1, mail system full; a 4xx the client tries again later (RFC 5321 §4.2.5). */
export const BUSY = (code: 451 | 452 = 451) =>
  reply(code, '4.3.1 The server is busy: it holds as many messages in memory as it may; try again later')

/** Bytes reserved for a message that declared no SIZE, before its first chunk: the rest as it arrives. */
export const FIRST_RESERVATION = 64 * 1024

/** The size a MAIL FROM declared (RFC 1870 SIZE=), if it declared one. */
export function declaredSize(args: SMTPServerAddress['args'] | undefined): number | undefined {
  const size = Number(args ? args.SIZE : undefined)
  return size > 0 ? size : undefined
}

/**
 * The first MAIL FROM parameter not among those `offered`, as a 555 5.5.4, if any. smtp-server
 * accepts any parameter: a server must not take what it did not advertise (RFC 5321 §4.1.1.11).
 */
export function unofferedParameter(
  args: Record<string, unknown> | false | undefined,
  offered: ReadonlySet<string>,
): Error | undefined {
  const name = Object.keys(args || {}).find((key) => !offered.has(key))
  if (name === undefined) return undefined
  return reply(
    555,
    `5.5.4 MAIL FROM parameter ${name.slice(0, 64)} is not supported (offered: ${[...offered].join(', ')})`,
  )
}

/**
 * The bytes of a message as they arrive, held once. smtp-server hands over chunks of the size the
 * socket read (16 KB under TLS), each its own copy that may share memory with what the client
 * sent next. They are joined into parts of BODY_PART_SIZE as they come, the size the queue stores
 * and the engine thread takes over without a copy: one copy of 1 MB at a time, instead of
 * thousands of small pieces that the queue would join again into a second copy of the whole.
 */
export class MessageBuffer {
  private parts: Buffer[] = []
  private pending: Buffer[] = []
  private pendingBytes = 0
  bytes = 0

  /**
   * `keep`: the chunks are kept as they came, not joined, for a message that is read in place
   * before it is stored (the MX door's): no copy of the whole, and none of its garbage, while the
   * message is checked. Only the chunks that share memory with the last one are copied at `take`
   * (smtp-server may still hold what the client sent after the end of data in that memory).
   */
  constructor(private readonly options: { keep?: boolean } = {}) {}

  push(chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.options.keep) return void this.parts.push(chunk)
    this.pending.push(chunk)
    this.pendingBytes += chunk.length
    if (this.pendingBytes >= BODY_PART_SIZE) this.flush()
  }

  /** Drops what is held. */
  clear(): void {
    this.parts = []
    this.pending = []
    this.pendingBytes = 0
  }

  /** The parts, theirs to hand over: none shares memory with smtp-server's (the last is copied out too). */
  take(): Buffer[] {
    this.flush()
    const last = this.parts.at(-1)
    if (this.options.keep && last)
      this.parts = this.parts.map((part) => (part.buffer === last.buffer ? Buffer.from(part) : part))
    return this.parts
  }

  private flush(): void {
    if (this.pending.length) this.parts.push(Buffer.concat(this.pending, this.pendingBytes))
    this.pending = []
    this.pendingBytes = 0
  }
}

/** Why a message's bytes were dropped as they came: past the size limit, past the budget, or its client gone. */
export type Dropped = 'too_large' | 'busy' | 'gone'

/**
 * Reads a DATA stream into a MessageBuffer held within `held`. Once the message cannot be taken
 * (past the size limit, or a grow the budget refuses), the rest is read and dropped, the
 * reservation released, and the end of data is answered by the caller from `dropped()` (not
 * spooled to disk: the commit takes the message in memory all the same, so a spool would only
 * move the peak there). A client that goes away before the end drops it too.
 */
export function readWithin(
  stream: SMTPServerDataStream,
  held: Reservation,
  options: { keep?: boolean; max?: number } = {},
) {
  const body = new MessageBuffer(options)
  let dropped: Dropped | null = null
  const drop = (why: Dropped) => {
    dropped = why
    body.clear()
    held.release()
  }
  stream.on('data', (chunk: Buffer) => {
    if (dropped) return
    if (stream.sizeExceeded || body.bytes + chunk.length > (options.max ?? Number.POSITIVE_INFINITY))
      return drop('too_large')
    const more = body.bytes + chunk.length - held.bytes
    if (more > 0 && !held.grow(more)) return drop('busy')
    body.push(chunk)
  })
  stream.on('close', () => {
    if (!stream.readableEnded) drop('gone')
  })
  return { body, dropped: (): Dropped | null => dropped }
}
