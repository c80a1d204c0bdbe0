// Failed authentication attempts counted per client address: a client that keeps guessing is
// refused for a while. SMTP AUTH counts in this process (authThrottle); the HTTP API's keys are
// counted in the store, shared by every node (transports/auth.ts), over the same clients and window.

/** Failed attempts are counted per client address over this window. */
export const AUTH_FAILURE_WINDOW_MS = 15 * 60_000
/** Counts of addresses whose window has passed are swept out once there are this many, or twice as many as after the last sweep. */
const AUTH_FAILURE_SWEEP_MIN = 10_000

/**
 * The client whose failed attempts are counted together: an IPv4 address (also when written
 * IPv4-mapped), or the /64 network of an IPv6 address, since one host commonly holds a whole /64
 * and would otherwise start a new count with each of its addresses.
 */
export function authClient(ip: string): string {
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip)
  if (v4) return v4[1]
  if (!ip.includes(':')) return ip
  const [head, tail] = ip.replace(/%.*$/, '').toLowerCase().split('::')
  // The groups on each side of "::" (an IPv4 address at the end takes two); "::" stands for as
  // many zeros as make eight. Only the first four are kept.
  const groupsOf = (part: string) => (part ? part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])) : [])
  const [first, last] = [groupsOf(head), groupsOf(tail ?? '')]
  const groups =
    tail === undefined
      ? first
      : [...first, ...Array<string>(Math.max(0, 8 - first.length - last.length)).fill('0'), ...last]
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`
}

/**
 * Failed attempts per client (authClient) within AUTH_FAILURE_WINDOW_MS of its first; at
 * `max`, the client is throttled until the window passes. Counts whose window has passed are swept
 * out as new clients come, so that guesses from ever new addresses cannot grow it without end.
 */
export function authThrottle(max: number, clock: () => number) {
  const failures = new Map<string, { count: number; since: number }>()
  let sweepAt = AUTH_FAILURE_SWEEP_MIN
  const live = (f: { since: number } | undefined): f is { count: number; since: number } =>
    f !== undefined && clock() - f.since <= AUTH_FAILURE_WINDOW_MS
  return {
    throttled(ip: string): boolean {
      const key = authClient(ip)
      const f = failures.get(key)
      if (!live(f)) return (failures.delete(key), false)
      return f.count >= max
    },
    /** How much longer, in ms, the client is throttled: 0 when it is not. */
    retryAfter(ip: string): number {
      const f = failures.get(authClient(ip))
      return live(f) && f.count >= max ? Math.max(0, f.since + AUTH_FAILURE_WINDOW_MS - clock()) : 0
    },
    fail(ip: string): void {
      const key = authClient(ip)
      const f = failures.get(key)
      if (live(f)) return void f.count++
      failures.set(key, { count: 1, since: clock() })
      if (failures.size < sweepAt) return
      for (const [k, v] of failures) if (!live(v)) failures.delete(k)
      sweepAt = Math.max(AUTH_FAILURE_SWEEP_MIN, 2 * failures.size)
    },
    get size() {
      return failures.size
    },
  }
}
