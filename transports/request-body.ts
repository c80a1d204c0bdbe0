import type { Context } from 'hono'
import { isUtf8 } from 'node:buffer'
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import { MailroomError, badInput } from '../errors.js'
import { BUDGET_RETRY_AFTER_S, type ByteBudget, type Reservation } from '../relay/byte-budget.js'

declare module 'hono' {
  interface ContextVariableMap {
    /** The byte budget's reservation for the message this request carries, released once it is answered. */
    heldBytes: Reservation
  }
}

/**
 * Most bytes of a request body on a route that never takes a message (OAuth, rules, webhooks,
 * blocks, orders): a registration or a token request is a few hundred bytes.
 */
export const SMALL_BODY_LIMIT = 64 * 1024

export const tooLarge = (limit: number) => new MailroomError(413, `the request body is larger than ${limit} bytes`)

/**
 * A full budget. The body, of a declared length within the limit, is then read and thrown away
 * as it arrives (nothing of it is kept), rather than the connection closed under a client still
 * sending it: one that cannot read while it writes (most) would see a broken pipe, never this
 * answer (RFC 9112 §9.6). See hasUnreadBody.
 */
export class OverBudget extends MailroomError {
  constructor() {
    super(503, `the server is holding too many message bytes; try again in ${BUDGET_RETRY_AFTER_S} s`, {
      headers: { 'Retry-After': String(BUDGET_RETRY_AFTER_S) },
    })
  }
}
const overBudget = () => new OverBudget()

/** The declared Content-Length, or undefined for a body of unknown length (chunked). */
export function declaredLength(c: Context): number | undefined {
  const length = c.req.header('content-length')
  if (length === undefined || c.req.header('transfer-encoding') !== undefined) return undefined
  return Number(length)
}

/** Whether the request came with a body (over a socket) that nobody has read to its end. */
export function hasUnreadBody(c: Context): boolean {
  const incoming = incomingOf(c)
  if (!incoming || incoming.readableEnded) return false
  return c.req.header('transfer-encoding') !== undefined || Number(c.req.header('content-length') ?? 0) > 0
}

/** The Node request a body comes from, if the app is served by Node (app.request() has none). */
function incomingOf(c: Context): IncomingMessage | undefined {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming
  return incoming instanceof Readable ? (incoming as IncomingMessage) : undefined
}

/**
 * Reserves the body's declared length for `accountId` in the byte budget before a byte of it is
 * read: a 413 past `limit`, a 503 with Retry-After when the budget cannot hold it. The
 * reservation is kept on the context and released once the request is answered (see
 * releaseHeldBytes). A body of unknown length starts from nothing and grows as it is read.
 */
export function reserveBody(c: Context, budget: ByteBudget, accountId: number, limit: number): Reservation {
  const declared = declaredLength(c) ?? 0
  if (declared > limit) throw tooLarge(limit)
  const reservation = budget.reserve(declared, accountId)
  if (!reservation) throw overBudget()
  c.set('heldBytes', reservation)
  return reservation
}

/**
 * The request's body, read straight from the socket (in tests without one, from the web
 * request), counted as it arrives: a 413 past `limit`, and, with a reservation, a 503 when a body
 * longer than reserved cannot grow it. A declared length is read into one buffer of that size, so
 * that the chunks do not live beside a copy of them all. Reading only gathers chunks: the main
 * thread is never held for more than one chunk's copy.
 */
export async function readBody(c: Context, limit: number, reservation?: Reservation): Promise<Buffer> {
  const declared = declaredLength(c)
  const into = declared !== undefined && declared <= limit ? Buffer.allocUnsafe(declared) : undefined
  const chunks: Buffer[] = []
  let length = 0
  const take = (chunk: Uint8Array) => {
    length += chunk.byteLength
    if (length > limit) throw tooLarge(limit)
    if (reservation && length > reservation.bytes && !reservation.grow(length - reservation.bytes)) throw overBudget()
    if (!into) chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
    else if (length <= into.length) into.set(chunk, length - chunk.byteLength)
    else throw badInput('the request body is longer than its Content-Length')
  }
  const incoming = incomingOf(c)
  if (incoming) await readIncoming(incoming, take)
  else if (c.req.raw.body) {
    const reader = c.req.raw.body.getReader()
    for (let r = await reader.read(); !r.done; r = await reader.read()) take(r.value)
  }
  return into ? into.subarray(0, length) : Buffer.concat(chunks)
}

/**
 * Gathers a Node request's chunks through `take`. On a refusal it stops reading (the rest of the
 * body is left to the socket's close) and rejects; a client that goes away rejects too.
 */
function readIncoming(incoming: IncomingMessage, take: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: unknown) => {
      incoming.off('data', onData).off('end', done).off('error', done).off('close', onClose)
      incoming.pause()
      if (err) reject(err)
      else resolve()
    }
    const onData = (chunk: Buffer) => {
      try {
        take(chunk)
      } catch (err) {
        done(err)
      }
    }
    const onClose = () => done(incoming.readableEnded ? undefined : new MailroomError(400, 'the client went away'))
    if (incoming.readableEnded) return resolve()
    incoming.on('data', onData).on('end', done).on('error', done).on('close', onClose)
  })
}

/**
 * Gives back the request's reservation once it is answered: every door answers a message only
 * once it is committed or refused (MCP's answers are plain JSON, never a stream, see mcp-http.ts).
 */
export function releaseHeldBytes(c: Context): void {
  c.get('heldBytes')?.release()
}

const UTF8_BOM = [0xef, 0xbb, 0xbf]
/** Whether the bytes begin with UTF-8's byte-order mark. */
export const startsWithBom = (bytes: Buffer) => UTF8_BOM.every((b, i) => bytes[i] === b)

/**
 * The text of a JSON body, or a 400 "the request body is not valid JSON". RFC 8259 §8.1: JSON
 * exchanged between systems is UTF-8 without a byte-order mark; a body with invalid UTF-8 would
 * otherwise be read with U+FFFD in place of its bytes, and its message sent altered.
 */
export function jsonText(bytes: Buffer): string {
  if (!isUtf8(bytes) || startsWithBom(bytes)) throw notJson()
  return bytes.toString('utf8')
}

/** A JSON text parsed, or a 400 "the request body is not valid JSON". */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw notJson()
  }
}

const notJson = () => badInput('the request body is not valid JSON')
