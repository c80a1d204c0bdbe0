import { Resolver } from 'node:dns/promises'
import type { Config } from '../config.js'
import type { DkimKey } from '../storage/store.js'
import { dnsRecords, type DnsRecord } from './dkim.js'

// Whether a sending domain's DNS records are published: `mailroom domain check` and checkDomain.

/**
 * The records a sending domain needs: the DKIM record of each of its keys (the signing one, its
 * oldest, first), then its SPF and DMARC records, and its return path's SPF record when it has one.
 */
export function domainRecords(keys: DkimKey[], nodeName: string, returnPath: string | null = null): DnsRecord[] {
  const [dkim, ...others] = dnsRecords(keys[0], nodeName, returnPath)
  return [dkim, ...keys.slice(1).map((k) => dnsRecords(k, nodeName)[0]), ...others]
}

/** TXT lookups of a check; tests swap in their own. */
export type TxtLookup = (name: string) => Promise<string[][]>

export interface CheckedRecord extends DnsRecord {
  /** Whether a record of its kind is at the name. */
  published: boolean
  /** Whether what is published says what `value` says. */
  matches: boolean
  /** The TXT records of its kind found at the name. */
  found: string[]
}

const NOT_FOUND = new Set(['ENODATA', 'ENOTFOUND', 'NOTFOUND'])

/** The `tag=value` pairs of a DKIM key record (RFC 6376 §3.2), whitespace dropped. */
const tags = (record: string) =>
  new Map(
    record.split(';').map((pair) => {
      const i = pair.indexOf('=')
      return [pair.slice(0, i).trim().toLowerCase(), pair.slice(i + 1).replace(/\s+/g, '')] as const
    }),
  )

/**
 * Looks the records a domain needs up and says of each whether it is published and matches. A
 * DKIM record matches when its key is ours; the SPF record when it is the domain's only one
 * (RFC 7208 §4.5: two are an error) and names this relay's host; the DMARC record when it is the
 * only one (its policy is the domain owner's choice).
 */
export async function checkRecords(expected: DnsRecord[], lookup: TxtLookup): Promise<CheckedRecord[]> {
  return Promise.all(
    expected.map(async (record) => {
      let all: string[]
      try {
        all = (await lookup(record.name)).map((chunks) => chunks.join(''))
      } catch (err) {
        if (!NOT_FOUND.has((err as NodeJS.ErrnoException).code ?? '')) throw err
        all = []
      }
      const kind = record.value
        .slice(0, record.value.indexOf(';') + 1 || undefined)
        .split(/[\s;]/)[0]
        .toLowerCase()
      const found = kind === 'v=dkim1' ? all : all.filter((r) => r.toLowerCase().startsWith(kind))
      return { ...record, published: found.length > 0, matches: matches(record, found), found }
    }),
  )
}

function matches(record: DnsRecord, found: string[]): boolean {
  if (record.value.startsWith('v=DKIM1')) return found.some((r) => tags(r).get('p') === tags(record.value).get('p'))
  if (found.length !== 1) return false
  if (record.value.startsWith('v=spf1')) {
    const ours = record.value.split(' ')[1].toLowerCase()
    return found[0].toLowerCase().split(/\s+/).includes(ours)
  }
  return true
}

/** TXT lookups through MAILROOM_DNS_SERVERS, or the system's servers. */
export function txtLookup(dnsServers: Config['delivery']['dnsServers']): TxtLookup {
  const resolver = new Resolver({ timeout: 5000, tries: 2 })
  if (dnsServers) resolver.setServers(dnsServers)
  return (name) => resolver.resolveTxt(name)
}
