import libmime from 'libmime'
import { decode as qpDecode } from 'libqp'

/** What a message says: its first text/plain and text/html parts that are not attachments, decoded. */
export interface MessageContent {
  text: string | null
  html: string | null
}

/** Multiparts inside multiparts deeper than this are not read (a message built to exhaust the reader). */
const MAX_DEPTH = 20
/** Parts past this many are not read: a message of 200,000 empty parts would hold the thread for a second. */
const MAX_PARTS = 1000

/**
 * Reads the text and HTML of a message (RFC 2045, RFC 2046): walks its MIME parts, undoes their
 * transfer encoding (base64, quoted-printable) and reads them in their charset (UTF-8 when the
 * charset is unknown). The bytes are read as latin1 so that splitting never changes one.
 */
export function messageContent(raw: Buffer): MessageContent {
  const found: MessageContent = { text: null, html: null }
  eachLeaf(raw, (leaf) => {
    const field = leaf.mime === 'text/plain' ? 'text' : leaf.mime === 'text/html' ? 'html' : null
    if (!field || leaf.disposition === 'attachment' || found[field] !== null) return
    found[field] = textOf(decoded(leaf.body, leaf.headers.get('content-transfer-encoding') ?? ''), leaf.params.charset)
  })
  return found
}

/** A part of a message that is not a multipart, as eachLeaf finds it. */
export interface MimeLeaf {
  /** Its content type, lower case (`text/plain` when it has none). */
  mime: string
  params: Record<string, string>
  /** `inline` or `attachment` (lower case). */
  disposition: string
  /** Its header fields by lower-case name, the first of each. */
  headers: Map<string, string>
  /** Its body as it is in the message (transfer-encoded), read as latin1. */
  body: string
  /** The content type of the multipart it is in, or null for a message of one part. */
  parent: { mime: string; params: Record<string, string> } | null
}

/**
 * Calls `visit` for each leaf part of a message (RFC 2045, RFC 2046), in order, walking its
 * multiparts to MAX_DEPTH. An inline message/rfc822 is a leaf: the walk does not go into it. The
 * bytes are read as latin1 so that splitting never changes one.
 */
export function eachLeaf(raw: Buffer, visit: (leaf: MimeLeaf) => void): void {
  walk(raw.toString('latin1'), 0, null, visit, { parts: 0 })
}

function walk(
  entity: string,
  depth: number,
  parent: MimeLeaf['parent'],
  visit: (leaf: MimeLeaf) => void,
  seen: { parts: number },
): void {
  if (++seen.parts > MAX_PARTS) return
  const end = /\r?\n\r?\n/.exec(entity)
  const head = end ? entity.slice(0, end.index) : entity
  const body = end ? entity.slice(end.index + end[0].length) : ''
  const headers = headersOf(head)
  const type = libmime.parseHeaderValue(headers.get('content-type') ?? 'text/plain')
  const mime = type.value.toLowerCase()
  if (mime.startsWith('multipart/')) {
    const boundary = type.params.boundary
    if (boundary && depth < MAX_DEPTH)
      for (const part of partsOf(body, boundary, MAX_PARTS - seen.parts))
        walk(part, depth + 1, { mime, params: type.params }, visit, seen)
    return
  }
  const disposition = libmime.parseHeaderValue(headers.get('content-disposition') ?? 'inline').value.toLowerCase()
  visit({ mime, params: type.params, disposition, headers, body, parent })
}

/** A header block's fields, by lower-case name, the first of each; folded lines joined (RFC 5322 §2.2.3). */
export function headersOf(head: string): Map<string, string> {
  const headers = new Map<string, string>()
  for (const field of head.split(/\r?\n(?![ \t])/)) {
    const colon = field.indexOf(':')
    if (colon <= 0) continue
    const name = field.slice(0, colon).trim().toLowerCase()
    if (!headers.has(name))
      headers.set(
        name,
        field
          .slice(colon + 1)
          .replace(/\r?\n[ \t]+/g, ' ')
          .trim(),
      )
  }
  return headers
}

/** The parts of a multipart body, at most `max`: what lies between its `--boundary` lines, up to `--boundary--`. */
function partsOf(body: string, boundary: string, max: number): string[] {
  const parts: string[] = []
  let current: string[] | null = null
  for (const line of body.split(/\r?\n/)) {
    const trimmed = line.trimEnd()
    if (trimmed === `--${boundary}--`) break
    if (trimmed === `--${boundary}`) {
      if (current) parts.push(current.join('\r\n'))
      if (parts.length >= max) return parts
      current = []
    } else current?.push(line)
  }
  if (current) parts.push(current.join('\r\n'))
  return parts
}

/** A part's body with its transfer encoding (base64, quoted-printable) undone. */
export function decoded(body: string, encoding: string): Buffer {
  switch (encoding.trim().toLowerCase()) {
    case 'base64':
      return Buffer.from(body.replace(/[^A-Za-z0-9+/=]/g, ''), 'base64')
    case 'quoted-printable':
      return qpDecode(body)
    default:
      return Buffer.from(body, 'latin1')
  }
}

function textOf(bytes: Buffer, charset: string | undefined): string {
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(bytes)
  } catch {
    // An unknown charset (RangeError): UTF-8, as most mail is.
    return new TextDecoder('utf-8').decode(bytes)
  }
}
