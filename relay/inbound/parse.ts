import { randomBytes } from 'node:crypto'
import EmailReplyParser from 'email-reply-parser'
import { type AddressObject, type AttachmentStream, type Headers, MailParser, type MessageText } from 'mailparser'
import type { InboundAddress, ParsedInbound } from '../../storage/store.js'
import { ByteRun, base64Length, countBoundaryLines, type MimeLeaf, mimeLeaves, splitHead } from './pieces.js'

/**
 * The bounds of the work one message may cost at intake. A message is at most
 * MAILROOM_MAX_MESSAGE_SIZE, but within that a hostile one can be made of many thousands of tiny
 * MIME parts (each a node mailparser builds and decodes), or of an HTML body that takes long to
 * turn into text. Past these, the message is still received whole (the raw bytes keep everything);
 * only what is parsed out of it for agents is cut.
 */
export const PARSE_LIMITS = {
  /** MIME boundary lines past which the body is not parsed at all: headers only, no text, no attachments listed. */
  maxParts: 1000,
  /** Characters of text kept in `text` (the rest cut, marked). */
  maxText: 1024 * 1024,
  /** Characters of HTML kept in `html`; a larger HTML body is not kept in the parsed form (null). */
  maxHtml: 2 * 1024 * 1024,
  /** Characters of HTML turned into text when there is no text part (mailparser's html-to-text is costly on large input). */
  maxHtmlToText: 1024 * 1024,
  /** Characters of the text email-reply-parser reads (the new part of a reply is at its top). */
  maxReplyInput: 64 * 1024,
  /**
   * Bytes of an attachment's body (as encoded) from which mailparser is not given it: a small
   * marker takes its place, and its size is counted from the encoded bytes. mailparser's splitter
   * walks a body line by line, hundreds of thousands of short-lived objects for a 25 MB message's
   * attachment whose bytes are then dropped (about 57 MB of peak RSS growth); below this size the
   * walk costs little.
   */
  elideBody: 256 * 1024,
}

const CUT_MARK = '\n[cut]'

/**
 * Parses a received message once, for what agents read: headers, text and HTML, the new part of
 * a reply, the attachments' names, types and sizes (their bytes are counted as they stream by,
 * never kept), and whether it was sent automatically. Within PARSE_LIMITS whatever the message.
 */
export async function parseInbound(
  raw: Buffer | Buffer[],
  mailFrom: string,
  elideBody = PARSE_LIMITS.elideBody,
): Promise<ParsedInbound> {
  const pieces = Array.isArray(raw) ? raw : [raw]
  const parts = countBoundaryLines(pieces, PARSE_LIMITS.maxParts + 1)
  // Too many parts: only the head is parsed (mailparser on the header block alone).
  const { headers, text, attachments } =
    parts > PARSE_LIMITS.maxParts
      ? await parseMime([headerBlock(pieces)])
      : ((await parseElided(pieces, elideBody)) ?? (await parseMime(pieces)))
  const plain = text.text ? cut(text.text, PARSE_LIMITS.maxText) : null
  const html = text.html && text.html.length <= PARSE_LIMITS.maxHtml ? text.html : null
  return {
    messageId: messageIds(headers.get('message-id'))[0] ?? null,
    inReplyTo: messageIds(headers.get('in-reply-to'))[0] ?? null,
    references: messageIds(headers.get('references')),
    from: addresses(headers.get('from'))[0] ?? null,
    replyTo: addresses(headers.get('reply-to')),
    to: addresses(headers.get('to')),
    cc: addresses(headers.get('cc')),
    subject: stringHeader(headers.get('subject')),
    date: dateHeader(headers.get('date')),
    text: plain,
    html,
    extractedText: plain === null ? null : extractedText(plain, headers),
    attachments,
    automatic: automatic(headers, mailFrom),
  }
}

type Mime = { headers: Headers; text: MessageText; attachments: ParsedInbound['attachments'] }

/** A message with its large attachments' bodies left out (elideLargeBodies). */
interface Elided {
  /** The message as mailparser is given it: views of the original pieces, and a marker in place of each body left out. */
  input: Buffer[]
  /** What each marker says before the number of the body it stands for: random for each parse, so that no sender can write one. */
  prefix: string
  /** The size of each body left out, decoded, in order. */
  sizes: number[]
  /** How many times the parse found each marker as an attachment's content. */
  found: number[]
}

/**
 * The message parsed with its large attachments left out (elideLargeBodies), null when none is,
 * or when the parse did not find each marker as the whole content of one attachment: then it read
 * the structure otherwise than the scan did, and the message is to be parsed whole.
 */
async function parseElided(pieces: Buffer[], minBody: number): Promise<Mime | null> {
  try {
    const elided = elideLargeBodies(pieces, minBody)
    if (!elided) return null
    const mime = await parseMime(elided.input, elided)
    return elided.found.every((n) => n === 1) ? mime : null
  } catch {
    return null
  }
}

/** Transfer encodings whose body is its content as it is (no encoding, or one mailparser passes through). */
const UNENCODED = ['', '7bit', '8bit', 'binary']

/** The types mailparser reads as the message's text when they are not attachments (it makes message/delivery-status text too). */
const TEXT_TYPES = ['text/plain', 'text/html', 'message/delivery-status']

/**
 * The message with the bodies of its large attachments (PARSE_LIMITS.elideBody, in base64 or not
 * encoded) each replaced by a marker in the same transfer encoding, their sizes counted from the
 * encoded bytes; the rest of the message is views of its pieces. A text part shown inline is
 * kept (it is the message's text), so are a quoted-printable body (its decoded size needs
 * decoding), a base64 body with anything but the alphabet and white space in it, and one with a
 * line that starts with `--`. Null when nothing is left out, or the scan found the structure
 * beyond its limits.
 */
export function elideLargeBodies(pieces: Buffer[], minBody: number): Elided | null {
  if (!Number.isFinite(minBody)) return null
  const run = new ByteRun(pieces)
  const leaves = mimeLeaves(run, minBody)
  if (!leaves?.length) return null
  const prefix = `mailroom-elided-${randomBytes(12).toString('hex')}-`
  const input: Buffer[] = []
  const sizes: number[] = []
  let at = 0
  for (const leaf of leaves) {
    if (readAsText(leaf) || leaf.dashLines) continue
    const size =
      leaf.encoding === 'base64'
        ? base64Length(run.views(leaf.start, leaf.end))
        : UNENCODED.includes(leaf.encoding)
          ? leaf.end - leaf.start
          : null
    if (size === null) continue
    const marker = Buffer.from(`${prefix}${sizes.length}`)
    input.push(
      ...run.views(at, leaf.start),
      leaf.encoding === 'base64' ? Buffer.from(marker.toString('base64')) : marker,
    )
    sizes.push(size)
    at = leaf.end
  }
  if (!sizes.length) return null
  input.push(...run.views(at, run.length))
  return { input, prefix, sizes, found: sizes.map(() => 0) }
}

/** Whether mailparser reads a part as text rather than as an attachment (its createNode); an unknown type as text, to keep it. */
function readAsText({ contentType, disposition }: MimeLeaf): boolean {
  return !contentType || (TEXT_TYPES.includes(contentType) && (disposition === '' || disposition === 'inline'))
}

/**
 * The MIME parse itself: the headers, the text content, and each attachment's size as it streams
 * by. With `elided`, an attachment whose content is one of its markers gets the size of the body
 * the marker stands for, and the marker is counted as found.
 */
function parseMime(input: Buffer[], elided?: Elided): Promise<Mime> {
  return new Promise((resolve, reject) => {
    const parser = new MailParser({
      // What agents get is the text, the HTML as received, and the list of attachments: no HTML
      // made from text, no links made, no images inlined (each costs work and memory).
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
      maxHtmlLengthToParse: PARSE_LIMITS.maxHtmlToText,
      checksumAlgo: false,
    })
    let headers: Headers = new Map()
    let text: MessageText = { type: 'text' }
    const attachments: ParsedInbound['attachments'] = []
    parser.on('headers', (h) => (headers = h))
    parser.on('data', (data: AttachmentStream | MessageText) => {
      if (data.type === 'text') {
        text = data
        return
      }
      const entry = {
        index: attachments.length,
        filename: data.filename ?? null,
        contentType: data.contentType || 'application/octet-stream',
        size: 0,
      }
      attachments.push(entry)
      // The start of the content, enough to tell a marker.
      const start: Buffer[] = []
      data.content.on('data', (chunk: Buffer) => {
        if (elided && entry.size <= MARKER_MAX) start.push(chunk)
        entry.size += chunk.length
      })
      data.content.on('end', () => {
        const marker = elided && entry.size <= MARKER_MAX ? markerIndex(Buffer.concat(start), elided) : null
        if (elided && marker !== null) {
          entry.size = elided.sizes[marker]
          elided.found[marker]++
        }
        data.release?.()
      })
    })
    parser.on('error', reject)
    parser.on('end', () => resolve({ headers, text, attachments }))
    feed(parser, input).catch(reject)
  })
}

/** The longest a marker is (its prefix, and the number of the body it stands for). */
const MARKER_MAX = 64

/** Which body a marker stands for, null for content that is not a marker of this parse. */
function markerIndex(content: Buffer, elided: Elided): number | null {
  const text = content.toString('latin1')
  if (!text.startsWith(elided.prefix)) return null
  const digits = text.slice(elided.prefix.length)
  return /^\d{1,6}$/.test(digits) && Number(digits) < elided.sizes.length ? Number(digits) : null
}

/** How much of the message mailparser is given at a time. */
const FEED_BYTES = 64 * 1024

/**
 * The message into the parser a slice at a time, waiting while it is busy: given a large
 * message at once, mailparser splits and decodes all of it before letting any of it go (about
 * 170 MB of peak growth for 25 MB, 95 MB fed this way).
 */
async function feed(parser: MailParser, pieces: Buffer[]): Promise<void> {
  if (pieces.length === 1 && pieces[0].length <= FEED_BYTES) return void parser.end(pieces[0])
  for (const piece of pieces)
    for (let at = 0; at < piece.length; at += FEED_BYTES)
      if (!parser.write(piece.subarray(at, at + FEED_BYTES)))
        await new Promise<void>((resolve) => parser.once('drain', resolve))
  parser.end()
}

/** The header block and the blank line after it (the whole message when it has no body). */
function headerBlock(pieces: Buffer[]): Buffer {
  const { head, rest } = splitHead(pieces)
  return rest.length ? Buffer.concat([head, rest[0].subarray(0, 2)]) : head
}

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}${CUT_MARK}` : s)

/**
 * What an agent reads first. email-reply-parser (about 5% of the door's CPU when run on every
 * message) only for a message that can hold quoted history: one that answers another
 * (In-Reply-To or References) or whose text has a quoted line (`>`, as text made from an HTML
 * reply's blockquote has). Any other message is new from its first line: its text, trimmed, as
 * much of it as the parser would have read.
 */
function extractedText(text: string, headers: Headers): string {
  const answers = headers.has('in-reply-to') || headers.has('references')
  return answers || QUOTED_LINE.test(text) ? extractReply(text) : text.slice(0, PARSE_LIMITS.maxReplyInput).trim()
}

const QUOTED_LINE = /^[ \t]*>/m

/** The new part of a reply: without the quoted history and the signature; the whole text when nothing is left. */
function extractReply(text: string): string {
  try {
    const reply = new EmailReplyParser().parseReply(text.slice(0, PARSE_LIMITS.maxReplyInput)).trim()
    return reply || text.trim()
  } catch {
    return text.trim()
  }
}

/** Every `<id>` in a header (Message-ID, In-Reply-To, References), without the brackets, in order. */
function messageIds(value: unknown): string[] {
  const joined = Array.isArray(value) ? value.join(' ') : typeof value === 'string' ? value : ''
  const bracketed = [...joined.matchAll(/<([^<>\s]+)>/g)].map((m) => m[1])
  if (bracketed.length) return bracketed
  // A bare id, as some senders write it.
  const bare = joined.trim()
  return bare && !/\s/.test(bare) ? [bare] : []
}

/** The mailboxes of an address header, groups (RFC 6854) flattened. */
function addresses(value: unknown): InboundAddress[] {
  const objects = (Array.isArray(value) ? value : value ? [value] : []) as AddressObject[]
  const out: InboundAddress[] = []
  const visit = (entry: { address?: string; name?: string; group?: unknown[] }) => {
    if (entry.group) for (const member of entry.group) visit(member as typeof entry)
    else if (entry.address) out.push({ address: entry.address, name: entry.name ?? '' })
  }
  for (const object of objects) for (const entry of object.value ?? []) visit(entry)
  return out
}

function stringHeader(value: unknown): string | null {
  return typeof value === 'string' ? value : null
}

function dateHeader(value: unknown): number | null {
  const ms = value instanceof Date ? value.getTime() : Number.NaN
  return Number.isFinite(ms) ? ms : null
}

/** The header's value as text: mailparser gives structured headers (Auto-Submitted among them) as `{ value, params }`. */
function headerWord(value: unknown): string | null {
  const v =
    typeof value === 'object' && value !== null && 'value' in value ? (value as { value: unknown }).value : value
  if (typeof v !== 'string') return null
  // RFC 3834 §5: a keyword, then optional parameters and comments.
  return (
    v
      .replace(/\([^)]*\)/g, '')
      .split(';')[0]
      .trim()
      .toLowerCase() || null
  )
}

/**
 * Why a message was sent automatically, so that nothing answers it by itself (RFC 3834 §2, §5):
 * an Auto-Submitted other than `no`, a Precedence of bulk, list or junk (the older convention
 * §2 names), or an envelope sender that is null (a bounce, RFC 5321 §4.5.5) or MAILER-DAEMON
 * or postmaster. A List-Id alone is not enough: a person's reply to a list has one too.
 */
function automatic(headers: Headers, mailFrom: string): string | null {
  const submitted = headerWord(headers.get('auto-submitted'))
  if (submitted && submitted !== 'no') return `Auto-Submitted: ${submitted}`
  const precedence = headerWord(headers.get('precedence'))
  if (precedence && ['bulk', 'list', 'junk'].includes(precedence)) return `Precedence: ${precedence}`
  if (mailFrom === '') return 'null envelope sender (a bounce or report)'
  const local = mailFrom.slice(0, mailFrom.lastIndexOf('@')).toLowerCase()
  if (local === 'mailer-daemon' || local === 'postmaster') return `envelope sender ${mailFrom}`
  return null
}
