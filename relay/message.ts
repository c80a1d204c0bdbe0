import libmime from 'libmime'
import { randomUUID } from 'node:crypto'
import { isIPv4, isIPv6 } from 'node:net'
import { wrap as base64Wrap } from 'libbase64'
import { encode as qpEncode, wrap as qpWrap } from 'libqp'
import { badInput } from '../errors.js'
import { parseAddressString, quoteString, uniqueAddresses, type Mailbox } from './addresses.js'
import { joinPieces } from '../storage/store.js'

/** A body "contains HTML" when it has at least one tag, e.g. `<p>`, `<br/>` or `</div>`. */
const HTML_TAG = /<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?\/?>/i

export const isHtml = (body: string) => HTML_TAG.test(body)

export interface Composed {
  raw: Buffer
  messageId: string
  /** Envelope recipients: To, Cc and Bcc, without repeats. */
  recipients: string[]
  /** The subject as its header carries it (line breaks made spaces): what the log keeps. */
  subject: string
}

export interface ComposeInput {
  from: Mailbox
  to: Mailbox[]
  cc?: Mailbox[]
  bcc?: Mailbox[]
  replyTo?: Mailbox[]
  subject: string
  body: string
  attachments?: { filename?: string; data: string }[]
  /** An HTML body: `body` is then its plain-text alternative. */
  html?: string
  /** `body` is plain text even when it holds something like a tag. */
  plain?: boolean
  /** The Message-ID answered (RFC 5322 §3.6.4), with its < >. */
  inReplyTo?: string
  /** The thread's Message-IDs, oldest first, each with its < >. */
  references?: string[]
  /** Used to make the Message-ID. */
  txid: string
  date: Date
}

/**
 * Builds the MIME message of an API send: text/plain, or multipart/alternative with a plain-text
 * part for an HTML body, inside multipart/mixed when there are attachments. Every line ends in
 * CRLF; headers are folded at 76 characters and non-ASCII text is written as RFC 2047 words; a
 * body that is not 7-bit safe is quoted-printable. A Bcc header is never written; Bcc recipients
 * are only in the envelope. Built directly as text (nodemailer's encoders do the encoding): the
 * streaming composer cost more than everything else of a send together.
 */
export function composeMessage(input: ComposeInput): Composed {
  boundHeaderText('subject', input.subject)
  for (const field of ['from', 'to', 'cc', 'replyTo'] as const)
    for (const box of [input[field] ?? []].flat()) boundHeaderText(`${field}: display name`, box.name)
  // randomUUID draws from a cached pool of random bytes (8-4-4-4-12 hex digits; the third and
  // fourth groups hold the version and variant): 12 random hex digits for the Message-ID, 12 for boundaries.
  const uuid = randomUUID()
  const messageId = newMessageId(input.txid, input.from.address, uuid)
  const boundary = (n: number) => `--_mailroom-${uuid.slice(24)}-${n}`
  const subject = oneLine(input.subject)
  const headers = [
    header('From', mailboxes([input.from])),
    header('To', mailboxes(input.to)),
    input.cc?.length ? header('Cc', mailboxes(input.cc)) : '',
    input.replyTo?.length ? header('Reply-To', mailboxes(input.replyTo)) : '',
    header('Subject', headerText(subject)),
    `Message-ID: ${messageId}\r\n`,
    input.inReplyTo ? header('In-Reply-To', oneLine(input.inReplyTo)) : '',
    input.references?.length ? header('References', oneLine(input.references.join(' '))) : '',
    `Date: ${dateHeader(input.date)}\r\n`,
    'MIME-Version: 1.0\r\n',
  ]
  const text =
    input.html !== undefined
      ? multipart('alternative', boundary(2), [textPart('plain', input.body), textPart('html', input.html)])
      : !input.plain && isHtml(input.body)
        ? multipart('alternative', boundary(2), [
            textPart('plain', htmlToText(input.body)),
            textPart('html', input.body),
          ])
        : textPart('plain', input.body)
  const content = input.attachments?.length
    ? multipart('mixed', boundary(1), [text, ...input.attachments.map(attachmentPart)])
    : text.endsWith('\r\n')
      ? text
      : `${text}\r\n`
  const raw = Buffer.from(headers.join('') + content, 'utf8')
  const recipients = uniqueAddresses([...input.to, ...(input.cc ?? []), ...(input.bcc ?? [])].map((m) => m.address))
  return { raw, messageId, recipients, subject }
}

/** A Message-ID (RFC 5322 §3.6.4) made of the transaction id and 12 random hex digits, at the sender's domain. */
export function newMessageId(txid: string, from: string, uuid = randomUUID()): string {
  return `<${txid}.${uuid.slice(0, 8)}${uuid.slice(9, 13)}@${from.slice(from.lastIndexOf('@') + 1).toLowerCase()}>`
}

/**
 * The header lines a submitted message lacks of the two every message gets (RFC 5322 §3.6: Date
 * and Message-ID), to be put in front of it; empty when it has both. A new Message-ID is at the
 * domain of `from` (the From header's address unless given).
 */
export function missingHeaders(
  headers: RawHeaders,
  txid: string,
  date: Date,
  from = headers.from,
): { lines: string; messageId: string | null } {
  const messageId = headers.messageId ?? (from ? newMessageId(txid, from) : null)
  const lines =
    (headers.messageId === null && messageId ? `Message-ID: ${messageId}\r\n` : '') +
    (headers.date === null ? `Date: ${dateHeader(date)}\r\n` : '')
  return { lines, messageId }
}

/** The Date header's value (RFC 5322 §3.3, in UTC), kept for the second it names. */
let lastDate = { second: NaN, text: '' }
export function dateHeader(date: Date): string {
  const second = Math.floor(date.getTime() / 1000)
  if (second !== lastDate.second) lastDate = { second, text: date.toUTCString().replace(/GMT/, '+0000') }
  return lastDate.text
}

/**
 * The trace line an SMTP server puts at the top of each message it takes in (RFC 5321 §4.4): who
 * handed it over (the EHLO name and address), who took it, how, under which id, and when.
 */
export function receivedHeader(t: {
  helo: string
  ip: string
  by: string
  protocol: string
  id: string
  date: Date
}): Buffer {
  const literal = isIPv6(t.ip) ? `IPv6:${t.ip}` : t.ip
  return Buffer.from(
    header(
      'Received',
      `from ${heloName(t.helo)} ([${literal}]) by ${t.by} (mailroom) with ${t.protocol} id ${t.id}; ${dateHeader(t.date)}`,
    ),
  )
}

/** RFC 5321 §4.1.2 Domain: labels of letters, digits and inner hyphens, separated by dots. */
const DOMAIN_NAME = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/i

/**
 * The client's EHLO name for the `from` clause: a domain or an address literal as sent (RFC 5321
 * §4.4), anything else as a quoted string (RFC 5322 §3.2.4, ASCII: other characters become `?`),
 * in which parentheses, brackets and `;` are plain characters. Written bare,
 * `x])_by_evil.example_(spoof` would open a comment (RFC 5322 §3.2.2) that hides the real `by`
 * clause from whoever reads the line.
 */
function heloName(helo: string): string {
  const literal = /^\[(ipv6:)?([^\]]*)\]$/i.exec(helo)
  if (literal ? (literal[1] ? isIPv6(literal[2]) : isIPv4(literal[2])) : DOMAIN_NAME.test(helo)) return helo
  return quoteString(helo.replace(/[^\x20-\x7e]/g, '?'))
}

/** One header line, folded, CRLF-terminated. */
export const header = (name: string, value: string) => `${libmime.foldLines(`${name}: ${value}`, 76)}\r\n`

/**
 * A word too long to fold around: written as RFC 2047 words, which can be split, it keeps lines
 * within 998. Exactly 77, not `{77,}`: an open count on a word of megabytes overflows the stack.
 */
const LONG_WORD = /\S{77}/

/**
 * Most characters of the subject, or of a display name, of an API send: a header line's limit
 * (RFC 5322 §2.1.1). Folding could carry more, but no reader shows it, and every check and
 * encoding of the text costs time in its length.
 */
export const MAX_HEADER_TEXT = 998

/** Refuses a header text past MAX_HEADER_TEXT, naming its field. */
function boundHeaderText(field: string, text: string): void {
  if (text.length > MAX_HEADER_TEXT)
    throw badInput(`${field}: at most ${MAX_HEADER_TEXT} characters (RFC 5322 §2.1.1), got ${text.length}`)
}

/** A header's text on one line: a line break in it would end the header (and could start another). */
const oneLine = (value: string) => value.replace(/\r?\n|\r/g, ' ')

/** Unstructured header text already on one line (`oneLine`): non-ASCII and control characters as RFC 2047 words. */
function headerText(flat: string): string {
  return /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(flat) || LONG_WORD.test(flat)
    ? libmime.encodeWord(flat, 'Q', 52)
    : libmime.encodeWords(flat, 'Q', 52)
}

/** An address list header value; addresses are checked ASCII (`isEmail`), names are quoted or encoded as needed. */
function mailboxes(list: Mailbox[]): string {
  return list
    .map(({ name, address }) => {
      if (!name) return /^[^\s",;<>()]+$/.test(address) ? address : `<${address}>`
      const display =
        LONG_WORD.test(name) || !/^[\x20-\x7e]*$/.test(name)
          ? libmime.encodeWord(name, 'Q', 52)
          : /^[\w ]*$/.test(name)
            ? name
            : quoteString(name)
      return `${display} <${address}>`
    })
    .join(', ')
}

/**
 * A text part: 7bit when it is ASCII with lines of at most 998 characters, else quoted-printable.
 * Its body ends as written: the line break that ends a message, or starts a boundary, is added by the caller.
 */
export function textPart(subtype: 'plain' | 'html', body: string): string {
  const crlf = body.replace(/\r?\n|\r/g, '\r\n')
  const sevenBit = !/[^\x09\x0d\x0a\x20-\x7e]/.test(crlf) && !hasLineLongerThan(crlf, 998)
  return (
    `Content-Type: text/${subtype}; charset=utf-8\r\nContent-Transfer-Encoding: ${sevenBit ? '7bit' : 'quoted-printable'}\r\n\r\n` +
    (sevenBit ? crlf : qpWrap(qpEncode(crlf), 76))
  )
}

/**
 * Whether a line of `text` (its line ends CRLF) passes `max` characters, in one pass. Not
 * /[^\r\n]{999}/: that expression starts again from every character, and was half of the CPU a
 * send of 4 KB of text took (657 µs, 0.8 now).
 */
function hasLineLongerThan(text: string, max: number): boolean {
  for (let start = 0; ; ) {
    const end = text.indexOf('\r\n', start)
    if ((end === -1 ? text.length : end) - start > max) return true
    if (end === -1) return false
    start = end + 2
  }
}

/** An attachment (its data is base64 in the request), its type guessed from the filename. */
function attachmentPart(a: { filename?: string; data: string }): string {
  const filename = a.filename || 'attachment'
  const data = base64Wrap(Buffer.from(a.data, 'base64').toString('base64'), 76)
  return (
    header('Content-Type', `${libmime.detectMimeType(filename)}; ${param('name', filename)}`) +
    'Content-Transfer-Encoding: base64\r\n' +
    header('Content-Disposition', `attachment; ${param('filename', filename)}`) +
    `\r\n${data}`
  )
}

/** A parameter value that may stand unquoted (RFC 2045 §5.1 token). */
const isToken = (value: string) => /^[\x21-\x7e]+$/.test(value) && !/[()<>@,;:\\"/[\]?=]/.test(value)

/**
 * A header parameter: a short token as is, other short ASCII quoted, anything else in RFC 2231
 * pieces (`key*0`, `key*1`, …) that fold onto lines of their own: a long filename written whole
 * would pass the 998 characters a line may have (RFC 5322 §2.1.1).
 */
function param(key: string, value: string): string {
  if (isToken(value) && value.length <= 60) return `${key}=${value}`
  if (/^[\x20-\x7e]*$/.test(value) && value.length <= 60) return `${key}=${quoteString(value)}`
  return libmime
    .buildHeaderParam(key, value, 50)
    .map((p) => `${p.key}=${isToken(p.value) ? p.value : quoteString(p.value)}`)
    .join('; ')
}

/** A multipart body; the CRLF before each delimiter belongs to the delimiter (RFC 2046 §5.1.1), not to the part. */
export function multipart(
  subtype: 'alternative' | 'mixed' | 'report; report-type=delivery-status' | 'report; report-type="tlsrpt"',
  boundary: string,
  parts: string[],
): string {
  return `Content-Type: multipart/${subtype}; boundary="${boundary}"\r\n\r\n${parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('')}--${boundary}--\r\n`
}

/** The plain-text alternative of an HTML body: tags dropped, block ends as line breaks. */
export function htmlToText(html: string): string {
  return (
    dropScriptsAndStyles(html)
      .replace(/<br\s*\/?>/gi, '\n')
      .replace(/<\/(p|div|h[1-6]|li|tr|table|blockquote)>/gi, '\n')
      // A tag ends before the next `<`: each try stops there, so a body of many `<` costs linear time.
      .replace(/<[^<>]+>/g, '')
      .replace(/&nbsp;/g, ' ')
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, '&')
      .replace(/\n{3,}/g, '\n\n')
      .trim()
  )
}

/**
 * Drops <script> and <style> elements with their content, in one pass: once a kind has no
 * closing tag left, its later openings are not searched again (a lazy regex rescanned the rest of
 * the body for each, in time quadratic in its length).
 */
function dropScriptsAndStyles(html: string): string {
  const lower = html.toLowerCase()
  const opening = /<(script|style)\b[^<>]*>/gi
  const unclosed = new Set<string>()
  let out = ''
  let at = 0
  for (let m = opening.exec(html); m; m = opening.exec(html)) {
    const kind = m[1].toLowerCase()
    if (unclosed.has(kind)) continue
    const close = lower.indexOf(`</${kind}`, opening.lastIndex)
    if (close < 0) {
      unclosed.add(kind)
      continue
    }
    const end = lower.indexOf('>', close)
    out += html.slice(at, m.index)
    at = end < 0 ? html.length : end + 1
    opening.lastIndex = at
  }
  return out + html.slice(at)
}

export interface RawHeaders {
  /** The first address of the From header: the envelope sender of a raw send. */
  from: string | null
  /** Every address of every From header (RFC 5322 §3.6 allows one header, with one or more authors). */
  authors: string[]
  /** The From headers' own text, one per header. */
  fromFields: string[]
  date: string | null
  recipients: string[]
  subject: string | null
  messageId: string | null
  replyTo: string | null
  /** The first Message-ID of In-Reply-To, without < >: the message this one answers. */
  inReplyTo: string | null
}

/**
 * Reads what the relay needs from a message's header block (the body is not parsed): the From
 * addresses, the recipients of To, Cc and Bcc, Subject (RFC 2047 words decoded), Message-ID and
 * Reply-To, the subject and Message-ID at most MAX_HEADER_TEXT characters (`kept`). RFC 5322
 * §2.2.3: folded header lines are unfolded first. `source` names the input in the errors.
 */
export function readHeaders(raw: Buffer, source = 'raw_email'): RawHeaders {
  const block = raw.subarray(0, headerEnd(raw, source)).toString('utf8')
  refuseBareCr(block, source)
  // Each field's lines are gathered, then joined once: in time linear in the header block, however
  // many fields or folded lines a client sends.
  const fields: { name: string; lines: string[] }[] = []
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && fields.length) {
      fields[fields.length - 1].lines.push(line.trim())
    } else {
      const colon = line.indexOf(':')
      if (colon <= 0) continue
      fields.push({ name: line.slice(0, colon).trim().toLowerCase(), lines: [line.slice(colon + 1).trim()] })
    }
  }
  const headers = new Map<string, string[]>()
  for (const { name, lines } of fields) {
    const value = lines.join(' ').trim()
    const values = headers.get(name)
    if (values) values.push(value)
    else headers.set(name, [value])
  }
  const addresses = (field: string) =>
    (headers.get(field) ?? []).flatMap((v) => parseAddressString(v).map((m) => m.address)).filter(Boolean)
  const first = (field: string) => headers.get(field)?.[0]
  const subject = first('subject')
  const authors = addresses('from')
  return {
    from: authors[0] ?? null,
    authors,
    fromFields: headers.get('from') ?? [],
    recipients: uniqueAddresses([...addresses('to'), ...addresses('cc'), ...addresses('bcc')]),
    subject: subject === undefined ? null : kept(libmime.decodeWords(subject)),
    messageId: kept(first('message-id')) ?? null,
    date: first('date') ?? null,
    replyTo: addresses('reply-to')[0] ?? null,
    inReplyTo: kept(/<([^<>\s]+)>/.exec(first('in-reply-to') ?? '')?.[1]) ?? null,
  }
}

/**
 * A header's text as the log keeps it: at most MAX_HEADER_TEXT characters. A Message-ID cannot be
 * folded, so no valid one is longer (RFC 5322 §2.1.1, §3.6.4); a longer subject is cut. The
 * message itself is relayed as it came.
 */
function kept<T extends string | undefined>(text: T): T {
  return (text !== undefined && text.length > MAX_HEADER_TEXT ? text.slice(0, MAX_HEADER_TEXT) : text) as T
}

/**
 * The start of a message in pieces, enough to hold its header block: the first piece, or the
 * first two, four, ... joined until the blank line that ends it is in, or the whole message.
 */
export function messageHead(pieces: Buffer[]): Buffer {
  for (let n = 1; ; n *= 2) {
    const head = joinPieces(pieces.slice(0, n))
    if (n >= pieces.length || head.includes('\r\n\r\n') || head.includes('\n\n') || head.includes('\n\r\n')) return head
  }
}

/**
 * Offset just past the blank line that ends the header block (or the whole message when none):
 * two line ends in a row, each CRLF or a bare LF, in any mix, as delivery reads them (it writes a
 * bare LF as CRLF). A bare CR is refused in the block (refuseBareCr), so it ends no line here.
 */
function headerEnd(raw: Buffer, source: string): number {
  const ends = [
    [raw.indexOf('\r\n\r\n'), 4],
    [raw.indexOf('\n\n'), 2],
    [raw.indexOf('\n\r\n'), 3],
  ].flatMap(([at, length]) => (at >= 0 ? [at + length] : []))
  if (ends.length === 0) {
    if (raw.length === 0) throw badInput(`${source}: the message is empty`)
    return raw.length
  }
  return Math.min(...ends)
}

/**
 * RFC 5322 §2.2: a header field ends in CRLF, and holds no CR or LF of its own. Delivery writes a
 * bare CR as a line end, so a bare CR in the header block would make lines the checks here never
 * read (`X-A: 1\rFrom: ceo@bank.example`): such a block is refused. A bare LF is read as a line
 * end here as by delivery, so LF-only messages (common from programs) read the same both ways.
 */
function refuseBareCr(block: string, source: string): void {
  const at = block.search(/\r(?!\n)/)
  if (at < 0) return
  const line = block.slice(0, at).split(/\r?\n/).length
  throw badInput(`${source}: line ${line} of the header has a bare CR; RFC 5322 §2.2 requires CRLF`, {
    code: 550,
    enhanced: '5.6.0',
  })
}
