import { extname } from 'node:path'
import libmime from 'libmime'
import { joinPieces } from '../../storage/store.js'

/**
 * A received message is kept in the pieces it arrived in (about 1 MB each, MessageBuffer), never
 * joined into one Buffer: joining a 25 MB message would hold it twice at once. These read it as
 * one run of bytes.
 */

/**
 * The header block (to the blank line after it, not included) and the rest of the message. The
 * head is almost always within the first piece; only when it is not are the pieces before its
 * end joined.
 */
export function splitHead(pieces: Buffer[]): { head: Buffer; rest: Buffer[] } {
  for (let k = 1; k <= pieces.length; k++) {
    const prefix = joinPieces(pieces.slice(0, k))
    const ends = [prefix.indexOf('\r\n\r\n'), prefix.indexOf('\n\n')].filter((i) => i >= 0)
    if (ends.length || k === pieces.length) {
      const end = ends.length ? Math.min(...ends) : prefix.length
      return { head: prefix.subarray(0, end), rest: [prefix.subarray(end), ...pieces.slice(k)].filter((p) => p.length) }
    }
  }
  return { head: Buffer.alloc(0), rest: [] }
}

const BOUNDARY = Buffer.from('\n--')

/** Lines that start with `--` (MIME boundaries and their ends), counted up to `stop`. */
export function countBoundaryLines(pieces: Buffer[], stop: number): number {
  const first = pieces[0] ?? Buffer.alloc(0)
  let n = first[0] === 0x2d && first[1] === 0x2d ? 1 : 0
  let tail: Buffer = Buffer.alloc(0)
  for (const piece of pieces) {
    // A `\n--` across the end of one piece and the start of the next.
    const seam = Buffer.concat([tail, piece.subarray(0, 2)])
    for (let i = seam.indexOf(BOUNDARY); i !== -1 && i < tail.length; i = seam.indexOf(BOUNDARY, i + 1))
      if (i + BOUNDARY.length > tail.length) n++
    for (let i = piece.indexOf(BOUNDARY); i !== -1 && n < stop; i = piece.indexOf(BOUNDARY, i + 3)) n++
    if (n >= stop) return n
    // The last two bytes so far, which may span pieces of one byte.
    const end = Buffer.concat([tail, piece.subarray(Math.max(0, piece.length - 2))])
    tail = end.subarray(Math.max(0, end.length - 2))
  }
  return n
}

/**
 * The pieces read by offset, as one run of bytes: a search, a few bytes, or views of a range, none
 * of which copies more than the bytes asked for (a copy only where a range crosses pieces).
 */
export class ByteRun {
  readonly length: number
  private readonly pieces: Buffer[]
  private readonly starts: number[] = []

  constructor(pieces: Buffer[]) {
    this.pieces = pieces.filter((p) => p.length)
    let at = 0
    for (const piece of this.pieces) {
      this.starts.push(at)
      at += piece.length
    }
    this.length = at
  }

  /** The index of the piece that holds offset `at` (< length). */
  private find(at: number): number {
    let lo = 0
    let hi = this.starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (this.starts[mid] <= at) lo = mid
      else hi = mid - 1
    }
    return lo
  }

  byte(at: number): number {
    const k = this.find(at)
    return this.pieces[k][at - this.starts[k]]
  }

  /** Views of the bytes from `start` to `end`, one per piece they cross. */
  views(start: number, end: number): Buffer[] {
    const out: Buffer[] = []
    for (let k = start < this.length ? this.find(start) : this.pieces.length; k < this.pieces.length; k++) {
      const from = this.starts[k]
      if (from >= end) break
      out.push(this.pieces[k].subarray(Math.max(0, start - from), end - from))
    }
    return out
  }

  /** The bytes from `start` to `end` as one Buffer: a view within a piece, else a copy (for short ranges). */
  slice(start: number, end: number): Buffer {
    const views = this.views(start, Math.min(end, this.length))
    return views.length === 1 ? views[0] : Buffer.concat(views)
  }

  /** The offset of the first `needle` at or after `from`, -1 if none; found across the seams of pieces too. */
  indexOf(needle: Buffer | number, from: number): number {
    const n = typeof needle === 'number' ? 1 : needle.length
    for (let k = from < this.length ? this.find(Math.max(0, from)) : this.pieces.length; k < this.pieces.length; k++) {
      const piece = this.pieces[k]
      const start = this.starts[k]
      const end = start + piece.length
      const i = piece.indexOf(needle, Math.max(0, from - start))
      if (i >= 0) return start + i
      if (n === 1) continue
      // One that starts in this piece's last bytes and ends in the pieces after it.
      const seamStart = Math.max(from, end - n + 1)
      const seam = this.slice(seamStart, end + n - 1)
      const j = seam.indexOf(needle)
      if (j >= 0 && seamStart + j < end) return seamStart + j
    }
    return -1
  }
}

/**
 * The bounds of the MIME scan (mimeLeaves), past which it gives up and the message is parsed
 * whole as before: a part's header block longer than this (mailparser's own cap is 1 MB), and
 * multiparts nested deeper than this.
 */
const SCAN_LIMITS = { head: 64 * 1024, depth: 32 }

/** A leaf part of a message (not a multipart), found by mimeLeaves. */
export interface MimeLeaf {
  /** Where its body is in the message: after the blank line that ends its header block, to the line end before the next delimiter line (or the end of the message). */
  start: number
  end: number
  /** As mailparser's splitter reads its header: lower case, '' when absent. */
  contentType: string
  disposition: string
  encoding: string
  /** Whether a line of its body starts with `--` (a delimiter line of no open multipart). */
  dashLines: boolean
}

const LF = 0x0a
const CR = 0x0d
const DASH = 0x2d
const DASH_LINE = Buffer.from('\n--')
const CR_DASH_LINE = Buffer.from('\n\r--')

/**
 * What a delimiter line may carry besides its boundary, as mailparser's splitter
 * (@zone-eu/mailsplit) reads one: a line end in front, the `--` prefix, the `--` of a closing
 * delimiter, up to 998 spaces or tabs, the line end.
 */
const DELIMITER_OVERHEAD = 2 + 2 + 2 + 998 + 2

/** A node of the MIME tree as the scan walks it: a multipart's boundary, and the node whose delimiters end it. */
interface ScanNode {
  boundary: Buffer | null
  owner: ScanNode | null
  depth: number
}

/**
 * The leaf parts of a message whose bodies are at least `minBody` bytes, found by walking its
 * MIME structure as mailparser's splitter does (the same delimiter lines, line ends and nesting,
 * an inline message/rfc822 read as a message within) without reading a body line by line: only
 * the header blocks and the lines that start with `--` are looked at. Linear in the message,
 * and bounded in memory by SCAN_LIMITS whatever it holds; null past them.
 */
export function mimeLeaves(run: ByteRun, minBody: number): MimeLeaf[] | null {
  const leaves: MimeLeaf[] = []
  let node: ScanNode = { boundary: null, owner: null, depth: 0 }
  let inHead = true
  let headStart = 0
  // After a multipart's closing delimiter, its own boundary delimits nothing more.
  let inEpilogue = false
  let leaf: Omit<MimeLeaf, 'end'> | null = null
  let longestBoundary = 0
  const dashLines = nextMatches(run, DASH_LINE)
  const crDashLines = nextMatches(run, CR_DASH_LINE)

  /** Which delimiter a line is (mailsplit's checkBoundary): 1 a part of `node`, 2 its end, 3 a part of an owner, 4 its end. */
  const delimiter = (line: Buffer): { kind: 1 | 2 | 3 | 4; owner: ScanNode } | null => {
    let at = 0
    if (line[0] === CR || line[0] === LF) at += line[0] === CR && line[1] === LF ? 2 : 1
    if (line.length < 4 || line[at] !== DASH || line[at + 1] !== DASH) return null
    let kind: 1 | 2 | false
    if (!inEpilogue && node.boundary && (kind = delimiterKind(line, at, node.boundary))) return { kind, owner: node }
    for (let owner = node.owner; owner; owner = owner.owner)
      if (owner.boundary && (kind = delimiterKind(line, at, owner.boundary))) return { kind: kind === 1 ? 3 : 4, owner }
    return null
  }

  /**
   * The body being read ends at the delimiter line that starts at `at`, without the line end
   * before it (which belongs to the delimiter); a body that runs to the end of the message keeps
   * its last line end, as the splitter gives it.
   */
  const closeLeaf = (at: number) => {
    if (!leaf) return
    let end = at
    if (at < run.length) {
      if (end > leaf.start && run.byte(end - 1) === LF) end--
      if (end > leaf.start && run.byte(end - 1) === CR) end--
    }
    if (end - leaf.start >= minBody) leaves.push({ ...leaf, end })
    leaf = null
  }

  const startPart = (parent: ScanNode, at: number): boolean => {
    node = { boundary: null, owner: parent, depth: parent.depth + 1 }
    inHead = true
    headStart = at
    inEpilogue = false
    return node.depth <= SCAN_LIMITS.depth
  }

  /** Moves on past a delimiter line; false past the scan's limits. */
  const follow = (d: { kind: 1 | 2 | 3 | 4; owner: ScanNode }, next: number): boolean => {
    switch (d.kind) {
      case 1:
        return startPart(node, next)
      case 2:
        return true
      case 3:
        return startPart(d.owner, next)
      case 4:
        node = d.owner
        inHead = false
        inEpilogue = true
        return true
    }
  }

  let pos = 0
  while (pos < run.length) {
    if (inHead) {
      const lf = run.indexOf(LF, pos)
      const next = lf < 0 ? run.length : lf + 1
      if (next - headStart > SCAN_LIMITS.head) return null
      const line = run.slice(pos, next)
      const d = delimiter(line)
      if (d) {
        if (!follow(d, next)) return null
      } else if (isBlankLine(line) || next === run.length) {
        const part = partHeaders(run.slice(headStart, next))
        if (part.boundary) {
          node.boundary = part.boundary
          longestBoundary = Math.max(longestBoundary, part.boundary.length)
        }
        if (part.embeddedMessage) {
          if (!startPart(node, next)) return null
        } else {
          inHead = false
          if (!part.multipart) leaf = { start: next, ...part.leaf, dashLines: false }
        }
      }
      pos = next
      continue
    }
    // A body: only the lines that start with `--` (after a CR, as the splitter reads them too) can end it.
    const at = startsDashLine(run, pos) ? pos : firstOf(dashLines(pos), crDashLines(pos))
    if (at < 0) break
    const lf = run.indexOf(LF, at)
    const next = lf < 0 ? run.length : lf + 1
    const d = next - at <= longestBoundary + DELIMITER_OVERHEAD ? delimiter(run.slice(at, next)) : null
    if (d) {
      closeLeaf(at)
      if (!follow(d, next)) return null
    } else if (leaf) leaf.dashLines = true
    pos = next
  }
  if (!inHead) closeLeaf(run.length)
  return leaves
}

/** The next line start at or after `from` whose line is `needle` without its leading LF; searched again only once `from` passes the last found. */
function nextMatches(run: ByteRun, needle: Buffer): (from: number) => number {
  let found = -2
  let searchedFrom = 0
  return (from) => {
    if (found === -2 || (found !== -1 && found < from) || (found === -1 && from < searchedFrom)) {
      searchedFrom = from
      found = run.indexOf(needle, from)
    }
    return found < 0 ? -1 : found + 1
  }
}

const firstOf = (a: number, b: number) => (a < 0 ? b : b < 0 ? a : Math.min(a, b))

function startsDashLine(run: ByteRun, at: number): boolean {
  const head = run.slice(at, at + 3)
  return (head[0] === DASH && head[1] === DASH) || (head[0] === CR && head[1] === DASH && head[2] === DASH)
}

const isBlankLine = (line: Buffer) =>
  (line.length === 1 && line[0] === LF) || (line.length === 2 && line[0] === CR && line[1] === LF)

/**
 * mailsplit's compareBoundary: whether a line (its `--` at `at`) is a delimiter of `boundary`:
 * 1 a part begins, 2 the multipart ends; SP and HTAB allowed before the line end, and a run of
 * CRs in it; only a closing delimiter may end the message without a line end.
 */
function delimiterKind(line: Buffer, at: number, boundary: Buffer): 1 | 2 | false {
  if (line.length < boundary.length + 3 + at || line.length > boundary.length + 2 + 2 + 998 + 2 + at) return false
  for (let i = 0; i < boundary.length; i++) if (line[i + 2 + at] !== boundary[i]) return false
  let i = boundary.length + 2 + at
  let kind: 1 | 2 = 1
  if (line[i] === DASH) {
    if (line[i + 1] !== DASH) return false
    kind = 2
    i += 2
  }
  while (i < line.length && (line[i] === 0x20 || line[i] === 0x09)) i++
  if (i === line.length) return kind === 2 ? 2 : false
  while (i < line.length && line[i] === CR) i++
  if (i < line.length && line[i] === LF) i++
  return i === line.length ? kind : false
}

/** What the scan needs of a part's header block, read as mailsplit's MimeNode reads it. */
function partHeaders(block: Buffer): {
  multipart: boolean
  boundary: Buffer | null
  embeddedMessage: boolean
  leaf: Pick<MimeLeaf, 'contentType' | 'disposition' | 'encoding'>
} {
  const fields = headerFields(block)
  const first = (key: string) => {
    const line = fields.find((f) => f.key === key)?.line
    return line === undefined ? '' : libmime.decodeHeader(utf8IfValid(line)).value.trim()
  }
  const disposition = libmime.parseHeaderValue(first('content-disposition'), { stripComments: true })
  let typeHeader = first('content-type')
  if (!fields.some((f) => f.key === 'content-type')) {
    const extension = extname(disposition.params.filename ?? '').replace(/^\./, '')
    typeHeader = extension
      ? libmime.detectMimeType(extension)
      : /^attachment$/i.test(disposition.value)
        ? 'application/octet-stream'
        : 'text/plain'
  }
  const type = libmime.parseHeaderValue(typeHeader, { stripComments: true })
  const contentType = (type.value || '').toLowerCase().trim()
  const encoding = withoutComments(first('content-transfer-encoding')).toLowerCase().trim()
  const dispositionValue = (disposition.value || '').toLowerCase().trim()
  const multipart = /^multipart\/./.test(contentType)
  // A boundary is ASCII, its trailing white space dropped (as mailsplit takes it).
  const boundary = (type.params.boundary ?? '').trimEnd()
  return {
    multipart,
    boundary: multipart && boundary && Buffer.byteLength(boundary) === boundary.length ? Buffer.from(boundary) : null,
    embeddedMessage:
      contentType === 'message/rfc822' &&
      ['', '7bit', '8bit', 'binary'].includes(encoding) &&
      dispositionValue === 'inline',
    leaf: { contentType, disposition: dispositionValue, encoding },
  }
}

/** A header block's fields, folded lines joined (mailsplit's Headers). */
function headerFields(block: Buffer): { key: string; line: string }[] {
  const text = block.toString('latin1')
  let end = text.length
  while (end > 0 && (text.charCodeAt(end - 1) === LF || text.charCodeAt(end - 1) === CR)) end--
  const lines = text.slice(0, end).split(/\r?\n/)
  const fields: { key: string; line: string }[] = []
  for (const line of lines) {
    const name = line.slice(0, Math.max(0, line.indexOf(':')))
    if ((line[0] === ' ' || line[0] === '\t') && fields.length) fields[fields.length - 1].line += `\r\n${line}`
    else fields.push({ key: name.toLowerCase().trim(), line })
  }
  // An mbox or HTTP preamble is not a field.
  if (fields.length && /^(From|POST) /i.test(fields[0].line)) fields.shift()
  return fields
}

/** A header line's bytes as UTF-8 when they are that, else as they are (mailsplit's _decodeHeaderValue). */
function utf8IfValid(line: string): string {
  const utf8 = Buffer.from(line, 'latin1').toString('utf8')
  return utf8.includes('\uFFFD') ? line : utf8
}

/** From the first `(` to the last `)` removed, line by line (mailsplit's stripComments, for the transfer encoding). */
function withoutComments(value: string): string {
  const start = value.indexOf('(')
  const end = value.lastIndexOf(')')
  return start >= 0 && end > start ? value.slice(0, start) + value.slice(end + 1) : value
}

/** Base64's alphabet (1), the white space a body's lines are cut by (2), and its padding (3); anything else 0. */
const BASE64_BYTES = new Uint8Array(256)
for (const c of Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/')) BASE64_BYTES[c] = 1
for (const c of Buffer.from('\r\n \t')) BASE64_BYTES[c] = 2
BASE64_BYTES[0x3d] = 3

/**
 * The length a base64 body decodes to, counted without decoding it: 3 bytes for every 4
 * characters of the alphabet, white space and line ends skipped. Null for a body with anything
 * else in it, or padding before its end, whose decoded length depends on how the decoder
 * (libbase64) treats those.
 */
export function base64Length(views: Buffer[]): number | null {
  let characters = 0
  let padded = false
  for (const view of views)
    for (let i = 0; i < view.length; i++) {
      const kind = BASE64_BYTES[view[i]]
      if (kind === 1) {
        if (padded) return null
        characters++
      } else if (kind === 3) padded = true
      else if (kind === 0) return null
    }
  return Math.floor((characters * 3) / 4)
}
