// A received message's authentication results (RFC 8601 words, as getInboundMessage gives them)
// in words a person reads: who signed it, whether its server was allowed to send, and DMARC's
// conclusion. Each part has a level: ok (a pass), warn (nothing proven) or bad (a check failed).

/** What each SPF result says of the server that handed the message over (RFC 7208 §2.6). */
const SPF = {
  pass: ['ok', () => "sender's server allowed"],
  fail: ['bad', (d) => `sender's server not allowed to send for ${d}`],
  softfail: ['warn', (d) => `sender's server probably not allowed to send for ${d}`],
  neutral: ['warn', (d) => `${d} neither allows nor forbids the sender's server`],
  none: ['warn', (d) => `${d} names no servers allowed to send for it`],
}

/** What each DKIM result says of one signature (RFC 6376 §6.1). */
const DKIM = {
  pass: ['ok', (d) => `Signed by ${d}`],
  fail: ['bad', (d) => `A signature of ${d} does not verify: the message was altered or forged`],
  neutral: ['warn', (d) => `A signature of ${d} could not be verified`],
  policy: ['warn', (d) => `A signature of ${d} is not acceptable`],
}

/** What each DMARC result concludes (RFC 7489 §11.2). */
const DMARC = {
  // The conclusion itself: nothing to add to its name.
  pass: ['ok', () => ''],
  fail: ['bad', (d) => `fails the DMARC policy of ${d}: the From address may be forged`],
  none: ['warn', (d) => `${d} publishes no DMARC policy`],
}

/** What the chain of a forwarded message says (RFC 8617 §4.4). */
const ARC = {
  pass: ['ok', () => 'forwarded along a valid chain'],
  fail: ['bad', () => 'its forwarding chain is broken'],
}

/** An error while checking: the answer is unknown, which proves nothing either way. */
const unknown = (what) => ['warn', () => `${what} could not be checked`]

function part(table, what, result, domain) {
  const [level, say] = table[result] ?? unknown(what)
  const text = say(domain ?? "the sender's domain")
  return { level, text: text ? `${text} (${what} ${result})` : `${what} ${result}` }
}

/**
 * The verdict on `auth` ({spf, dkim, dmarc, arc}): its parts in order (DKIM, SPF, DMARC, then ARC
 * when there was a chain), and the overall level. DMARC decides where it concluded: a pass proves
 * the From domain (a forwarded message may fail SPF and still pass), a fail is bad; without its
 * conclusion, any failed check is bad, else nothing is proven (warn).
 */
export function verdict(auth) {
  const parts = [
    ...(auth.dkim.length
      ? auth.dkim.map((s) => part(DKIM, 'DKIM', s.result, s.domain))
      : [{ level: 'warn', text: 'Not signed (DKIM none)' }]),
    part(SPF, 'SPF', auth.spf.result, auth.spf.domain),
    part(DMARC, 'DMARC', auth.dmarc.result, auth.dmarc.domain),
  ]
  if (auth.arc.result !== 'none') parts.push(part(ARC, 'ARC', auth.arc.result))
  const failed = parts.some((p) => p.level === 'bad')
  const level = { pass: 'ok', fail: 'bad' }[auth.dmarc.result] ?? (failed ? 'bad' : 'warn')
  return { level, parts }
}

/** The parts as one sentence: "Signed by example.com (DKIM pass); sender's server allowed (SPF pass); DMARC pass". */
export const sentence = (parts) => parts.map((p) => p.text).join('; ')

/** The verdict's level as a badge's word. */
export const LEVELS = { ok: 'Authenticated', warn: 'Unverified', bad: 'Failed checks' }
