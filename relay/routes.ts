import { Resolver } from 'node:dns/promises'
import { isIP } from 'node:net'

/** The DNS lookups delivery needs; tests swap in a stub. */
export interface MxResolver {
  resolveMx(domain: string): Promise<{ exchange: string; priority: number }[]>
  resolve4(host: string): Promise<string[]>
  resolve6(host: string): Promise<string[]>
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
  options: { mxPort: number; smarthost: { host: string; port: number } | null },
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
  for (const name of names) {
    const addresses = await addressesOf(resolver, name)
    if (addresses.length) hosts.push({ name, addresses, port: options.mxPort })
  }
  if (hosts.length) return { hosts }
  return records.length
    ? { error: { code: 451, response: `4.4.4 no address for the MX hosts of ${domain}`, permanent: false } }
    : { error: { code: 550, response: `5.1.2 ${domain} has no MX and no address`, permanent: true } }
}
