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
