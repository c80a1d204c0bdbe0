import type { Context } from 'hono'
import { BlockList, isIP } from 'node:net'

/**
 * How the client's address of a request is read: the socket's, unless the socket's peer is one of
 * the trusted proxies (MAILROOM_TRUST_PROXY). Then X-Forwarded-For is read from the right, where
 * each proxy appended the address it was reached from: the first address that is not a trusted
 * proxy is the client's. Anything left of it was written by the client and proves nothing.
 */
export function clientAddress(trustProxy: readonly string[]): (c: Context) => string {
  if (trustProxy.length === 0) return socketAddress
  const trusted = proxyMatcher(trustProxy)
  return (c) => {
    let address = socketAddress(c)
    const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((hop) => unmapped(hop.trim()))
    // A hop that is not an address (a proxy that wrote `unknown`) ends the walk at the proxy that wrote it.
    for (let i = hops.length - 1; i >= 0 && trusted(address) && isIP(hops[i]) !== 0; i--) address = hops[i]
    return address
  }
}

/** The address the socket saw (IPv4-mapped IPv6 shown as IPv4). */
function socketAddress(c: Context): string {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined
  return unmapped(env?.incoming?.socket?.remoteAddress ?? '127.0.0.1')
}

const unmapped = (ip: string) => (ip.toLowerCase().startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip)

/** Whether an address is one of the entries (addresses, CIDR ranges, `loopback`). */
function proxyMatcher(entries: readonly string[]): (ip: string) => boolean {
  const list = new BlockList()
  const family = (ip: string) => (isIP(ip) === 6 ? 'ipv6' : 'ipv4')
  for (const entry of entries) {
    if (entry === 'loopback') {
      list.addSubnet('127.0.0.0', 8, 'ipv4')
      list.addAddress('::1', 'ipv6')
      continue
    }
    const [address, bits] = entry.split('/')
    if (bits === undefined) list.addAddress(address, family(address))
    else list.addSubnet(address, Number(bits), family(address))
  }
  return (ip) => isIP(ip) !== 0 && list.check(ip, family(ip))
}
