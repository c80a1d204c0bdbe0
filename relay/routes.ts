import { Resolver } from 'node:dns/promises'
import { BlockList, isIP, isIPv4 } from 'node:net'

/** The DNS lookups delivery needs; tests swap in a stub. */
export interface MxResolver {
  resolveMx(domain: string): Promise<{ exchange: string; priority: number }[]>
  resolve4(host: string): Promise<string[]>
  resolve6(host: string): Promise<string[]>
  /**
   * TXT records, each as its strings: a domain's MTA-STS and TLS-RPT records (RFC 8461, RFC
   * 8460). A stub without it answers that no domain has any.
   */
  resolveTxt?(name: string): Promise<string[][]>
}

export interface MxHost {
  /** The MX host name (or the domain itself for an implicit MX). */
  name: string
  /** Its addresses, IPv4 first. */
  addresses: string[]
  port: number
}

/** Where a domain's mail goes, or why it cannot go anywhere. */
export type Route = { hosts: MxHost[] } | { error: { code: number; response: string; permanent: boolean } }

/**
 * Address ranges no MX may be in, by the kind a refusal names; the first match names it (the
 * broadcast address is in 240/4, the loopback and unspecified ones in ::/3). From IANA's
 * special-purpose address registries (RFC 6890) and the IPv6 ones outside 2000::/3, the only
 * global unicast space (RFC 4291 §2.4). Connecting to them would let a DNS record turn the relay
 * into a way into the network it runs in.
 */
const NOT_PUBLIC: [kind: string, ranges: string[]][] = [
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['unspecified', ['0.0.0.0/8', '::/128']],
  // RFC 1918; RFC 4193 unique local; RFC 3879 deprecated site-local.
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7', 'fec0::/10']],
  ['link-local', ['169.254.0.0/16', 'fe80::/10']],
  ['carrier-grade NAT', ['100.64.0.0/10']], // RFC 6598
  ['multicast', ['224.0.0.0/4', 'ff00::/8']],
  ['broadcast', ['255.255.255.255/32']],
  // RFC 5737, RFC 3849, RFC 9637.
  ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32', '3fff::/20']],
  ['benchmarking', ['198.18.0.0/15', '2001:2::/48']], // RFC 2544, RFC 5180
  // IETF protocol assignments, future use (RFC 1112), local-use NAT64 (RFC 8215), discard-only
  // (RFC 6666), ORCHID (RFC 7343), and all IPv6 outside 2000::/3.
  [
    'reserved',
    [
      '192.0.0.0/24',
      '240.0.0.0/4',
      '64:ff9b:1::/48',
      '100::/64',
      '2001:10::/28',
      '2001:20::/28',
      '::/3',
      '4000::/2',
      '8000::/1',
    ],
  ],
]

/**
 * One list per kind and family: checked against an IPv6 rule, an IPv4 address counts as its
 * IPv4-mapped form, so ::/3 would take every IPv4 address.
 */
const RANGE_LISTS = NOT_PUBLIC.map(([kind, ranges]) => {
  const lists = { ipv4: new BlockList(), ipv6: new BlockList() }
  for (const range of ranges) {
    const [net, bits] = range.split('/')
    const family = isIPv4(net) ? 'ipv4' : 'ipv6'
    lists[family].addSubnet(net, Number(bits), family)
  }
  return { kind, lists }
})

/** The eight 16-bit groups of an IPv6 address in any RFC 4291 §2.2 text form. */
function groupsOf(address: string): number[] {
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address)
  const text = v4
    ? `${address.slice(0, v4.index)}${((+v4[1] << 8) | +v4[2]).toString(16)}:${((+v4[3] << 8) | +v4[4]).toString(16)}`
    : address
  const [head, tail] = text.split('::')
  const parse = (s: string | undefined) => (s ? s.split(':').map((g) => Number.parseInt(g, 16)) : [])
  const [h, t] = [parse(head), parse(tail)]
  return tail === undefined ? h : [...h, ...new Array(8 - h.length - t.length).fill(0), ...t]
}

/** The IPv4 address an IPv6 one stands for, if it embeds one. */
function embeddedIPv4(g: number[]): string | null {
  const v4 = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.')
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && g[5] === 0xffff) return v4(g[6], g[7]) // RFC 4291 §2.5.5.2: IPv4-mapped
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6], g[7]) // RFC 6052: NAT64
  if (g[0] === 0x2002) return v4(g[1], g[2]) // RFC 3056: 6to4
  if (g[0] === 0x2001 && g[1] === 0) return v4(g[6] ^ 0xffff, g[7] ^ 0xffff) // RFC 4380 §4: Teredo client, inverted
  return null
}

/** The kind of non-public range an address is in (`loopback`, `private`, …), or null for a public one. */
export function nonPublicKind(address: string): string | null {
  const bare = address.replace(/%.*$/, '') // a zone index names an interface, not an address
  const family = isIPv4(bare) ? 'ipv4' : 'ipv6'
  if (family === 'ipv6') {
    const embedded = embeddedIPv4(groupsOf(bare))
    if (embedded) return nonPublicKind(embedded)
  }
  return RANGE_LISTS.find(({ lists }) => lists[family].check(bare, family))?.kind ?? null
}

/** The system resolver, or one that asks the given `ip:port` servers. */
export function createResolver(servers: string[] | null): MxResolver {
  const r = new Resolver({ timeout: 5000, tries: 2 })
  if (servers) r.setServers(servers)
  return r
}

const NOT_FOUND = new Set(['ENODATA', 'ENOTFOUND', 'NOTFOUND'])
const code = (err: unknown) => (err as NodeJS.ErrnoException).code ?? ''

/** A host's addresses; throws when the lookup failed (as opposed to finding none). */
async function addressesOf(resolver: MxResolver, host: string): Promise<string[]> {
  if (isIP(host)) return [host]
  const results = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
  const addresses = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []))
  const failure = results.find((r) => r.status === 'rejected' && !NOT_FOUND.has(code(r.reason)))
  if (!addresses.length && failure) throw (failure as PromiseRejectedResult).reason
  return addresses
}

/**
 * The hosts to try for a domain, in order (RFC 5321 §5.1): its MX records by preference; no MX
 * record means the domain's own A/AAAA is the implicit MX; a null MX (RFC 7505) means the domain
 * accepts no mail. A smarthost, when configured, takes all mail instead.
 */
export async function resolveRoute(
  resolver: MxResolver,
  domain: string,
  options: { mxPort: number; smarthost: { host: string; port: number } | null; allowPrivateMx: boolean },
): Promise<Route> {
  try {
    return await lookUp(resolver, domain, options)
  } catch (err) {
    return {
      error: {
        code: 451,
        response: `4.4.3 DNS lookup for ${domain} failed (${code(err) || String(err)})`,
        permanent: false,
      },
    }
  }
}

async function lookUp(
  resolver: MxResolver,
  domain: string,
  options: Parameters<typeof resolveRoute>[2],
): Promise<Route> {
  if (options.smarthost) {
    const addresses = await addressesOf(resolver, options.smarthost.host)
    if (!addresses.length)
      return { error: { code: 451, response: `smarthost ${options.smarthost.host} has no address`, permanent: false } }
    return { hosts: [{ name: options.smarthost.host, addresses, port: options.smarthost.port }] }
  }
  let records: { exchange: string; priority: number }[]
  try {
    records = await resolver.resolveMx(domain)
  } catch (err) {
    if (!NOT_FOUND.has(code(err))) throw err
    records = []
  }
  // RFC 7505: a single MX of "." (empty exchange) says the domain accepts no mail.
  if (records.length === 1 && (records[0].exchange === '' || records[0].exchange === '.')) {
    return { error: { code: 556, response: `5.1.10 ${domain} does not accept mail (null MX)`, permanent: true } }
  }
  const names = records.length
    ? [...records].sort((a, b) => a.priority - b.priority).map((r) => r.exchange.replace(/\.$/, ''))
    : [domain]
  const hosts: MxHost[] = []
  const refusals: string[] = []
  for (const name of names) {
    const found = await addressesOf(resolver, name)
    // The addresses checked are the ones connected to (mx-client connects by address): a second
    // lookup, which a DNS server could answer differently, never happens.
    const addresses = options.allowPrivateMx ? found : found.filter((a) => !nonPublicKind(a))
    if (addresses.length) hosts.push({ name, addresses, port: options.mxPort })
    else if (found.length) refusals.push(`${name} resolves only to ${found.map(describe).join(' and ')}`)
  }
  if (hosts.length) return { hosts }
  if (refusals.length)
    return { error: { code: 556, response: `5.4.4 ${refusals.join('; ')}: not delivered`, permanent: true } }
  return records.length
    ? { error: { code: 451, response: `4.4.4 no address for the MX hosts of ${domain}`, permanent: false } }
    : { error: { code: 550, response: `5.1.2 ${domain} has no MX and no address`, permanent: true } }
}

/** `127.0.0.1, a loopback address` */
function describe(address: string): string {
  const kind = nonPublicKind(address)
  return `${address}, ${/^[aeiou]/.test(kind ?? '') ? 'an' : 'a'} ${kind} address`
}
