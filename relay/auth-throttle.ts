import type { Store } from '../storage/store.js'

// Failed authentication attempts counted per client address: a client that keeps guessing is
// refused for a while. SMTP AUTH (relay/submission.ts) and the HTTP API's keys (transports/auth.ts)
// are each counted in the store (authFailureCount), shared by every node, over the same clients
// and window.

/** Failed attempts are counted per client address over this window. */
export const AUTH_FAILURE_WINDOW_MS = 15 * 60_000

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
 * One door's count of failed attempts (`door`: `http`, `smtp`), kept in the store per client
 * (authClient) so that every node shares it: from the `max`-th failure in AUTH_FAILURE_WINDOW_MS
 * the client is throttled until that window ends.
 */
export function authFailureCount(store: Pick<Store, 'authFailures'>, door: string, max: number, clock: () => number) {
  const clientOf = (ip: string) => `${door} ${authClient(ip)}`
  return {
    /** When the client's throttle ends, if it is throttled now. */
    async throttledUntil(ip: string): Promise<number | undefined> {
      const until = await store.authFailures.throttledUntil(clientOf(ip))
      return until !== undefined && until > clock() ? until : undefined
    },
    /** Counts a failure now; answers the count and, from the `max`-th, the throttle's end. */
    fail: (ip: string) =>
      store.authFailures.fail({ client: clientOf(ip), now: clock(), windowMs: AUTH_FAILURE_WINDOW_MS, max }),
  }
}
