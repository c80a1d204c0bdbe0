import type { DnsResolve } from './verify.js'

/**
 * How the MX door keeps the answers of its SPF, DKIM and DMARC lookups. A sender's mail comes
 * in bursts, and each message of it asks for the same three or four records: kept for a minute,
 * they are looked up once per burst, not once per message. Node's resolver does not give a TXT
 * record's TTL, so every answer is kept for `ttlMs` at most, short enough that a changed record
 * (a rotated DKIM key, a tightened DMARC policy) is seen within a minute.
 */
export const DNS_CACHE = {
  /** Answers kept, the oldest let go first past it. */
  maxEntries: 10_000,
  /** How long an answer is kept. */
  ttlMs: 60_000,
  /** How long "no such name" or "no such record" is kept: a record just published is seen soon. */
  negativeTtlMs: 5_000,
}

/** The errors that say the record does not exist (kept briefly); any other (a timeout, SERVFAIL) is never kept. */
const NEGATIVE = new Set(['ENOTFOUND', 'ENODATA'])

/**
 * `resolve` with its answers kept (DNS_CACHE): concurrent lookups of the same name and type share
 * one query, answers are kept for `ttlMs`, non-existence for `negativeTtlMs`, and temporary
 * failures not at all (the next message asks again).
 */
export function cachedResolve(
  resolve: DnsResolve,
  options: { clock?: () => number; limits?: typeof DNS_CACHE } = {},
): DnsResolve {
  const clock = options.clock ?? Date.now
  const limits = options.limits ?? DNS_CACHE
  // Insertion order is age order: an entry is set again only after it was deleted.
  const kept = new Map<string, { answer: Promise<unknown>; until: number }>()
  return (name, rrtype) => {
    const key = `${rrtype} ${name.toLowerCase()}`
    const now = clock()
    const hit = kept.get(key)
    if (hit && hit.until > now) return hit.answer
    if (hit) kept.delete(key)
    // Until it settles, the lookup itself is kept, so that lookups meanwhile share it.
    const entry = { answer: resolve(name, rrtype), until: Number.POSITIVE_INFINITY }
    kept.set(key, entry)
    if (kept.size > limits.maxEntries) kept.delete(kept.keys().next().value as string)
    entry.answer.then(
      () => {
        entry.until = clock() + limits.ttlMs
      },
      (err: NodeJS.ErrnoException) => {
        if (NEGATIVE.has(err?.code ?? '')) entry.until = clock() + limits.negativeTtlMs
        else if (kept.get(key) === entry) kept.delete(key)
      },
    )
    return entry.answer
  }
}
