import { randomInt } from 'node:crypto'

/** The sequence numbers 0 … 0xfff as three hex digits. */
const SEQ_HEX = Array.from({ length: 0x1000 }, (_, i) => i.toString(16).padStart(3, '0'))

/**
 * Transaction ids: `hex(unix_ms * 0x1000 + (seq % 0x1000))` followed by a 4-hex-digit instance
 * suffix, 18 lower-case hex characters today (19 once the clock grows). The suffix is random per
 * process and the sequence never repeats within one millisecond, so ids are unique across
 * processes and nodes (the store's unique index is the last guard).
 */
export function createTxidGenerator(suffix: number = randomInt(0x10000)): (now?: number) => string {
  const tail = suffix.toString(16).padStart(4, '0')
  let seq = randomInt(0x1000)
  let lastMs = 0
  let usedInMs = 0
  return (now = Date.now()) => {
    if (now > lastMs) {
      lastMs = now
      usedInMs = 0
    } else if (++usedInMs >= 0x1000) {
      // 4096 ids in one millisecond: borrow the next millisecond rather than repeat a value.
      lastMs += 1
      usedInMs = 0
    }
    seq = (seq + 1) % 0x1000
    // hex(ms * 0x1000 + seq) is hex(ms) followed by seq's three hex digits (no BigInt needed).
    return lastMs.toString(16) + SEQ_HEX[seq] + tail
  }
}
