import { InvalidArgumentError, Option, type Command } from 'commander'
import type { Config } from '../config.js'
import { isDomain } from '../relay/addresses.js'
import type { DnsRecord } from '../relay/dkim.js'
import type { Services } from '../tools/define.js'
import type { DkimAlgorithm, DkimKey } from '../storage/store.js'
import { accountAction, accountOption, adminAction, asAccount } from './common.js'

type Deps = Pick<Services, 'store' | 'clock'> & {
  config: Pick<Config, 'nodeName'> & { inbound?: Pick<Config['inbound'], 'returnPath'> }
}

/** A domain as stored: lower case, no trailing dot. */
export const domainName = (value: string) => {
  const v = value.trim().toLowerCase().replace(/\.$/, '')
  if (!isDomain(v)) throw new InvalidArgumentError(`"${value}" is not a domain name`)
  return v
}

// RFC 6376 §3.1: a selector is one or more DNS labels.
const SELECTOR = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/
const selectorName = (value: string) => {
  const v = value.trim().toLowerCase()
  if (!SELECTOR.test(v) || v.length > 63)
    throw new InvalidArgumentError(`"${value}" is not a DKIM selector (DNS labels)`)
  return v
}

/** A selector no key of the domain has: `mr-<date>`, then `mr-<date>-2`… */
function newSelector(keys: DkimKey[], now: number): string {
  const base = `mr-${new Date(now).toISOString().slice(0, 10).replaceAll('-', '')}`
  const taken = new Set(keys.map((k) => k.selector))
  let selector = base
  for (let n = 2; taken.has(selector); n++) selector = `${base}-${n}`
  return selector
}

export interface AddedKey {
  domain: string
  selector: string
  algorithm: DkimAlgorithm
  records: DnsRecord[]
}

/**
 * Generates a key for the domain and stores it for the account: a new sending domain, or with
 * `rotate` a new selector of one it has. Refused when another account has the domain.
 */
export async function addDomainKey(
  { store, config, clock }: Deps,
  input: { accountId: number; domain: string; selector?: string; algorithm: DkimAlgorithm; rotate?: boolean },
): Promise<AddedKey> {
  const now = clock()
  const keys = await store.domains.keys(input.domain)
  if (keys.length && !input.rotate)
    throw new Error(
      keys[0].accountId === input.accountId
        ? `${input.domain} is a sending domain of account ${input.accountId} already (domain rotate makes a new key)`
        : `${input.domain} is a sending domain of another account (${keys[0].accountId})`,
    )
  const selector = input.selector ?? newSelector(keys, now)
  const { dnsRecords, generateDkimKey } = await import('../relay/dkim.js')
  const key = await store.domains.addKey({ ...input, selector, ...generateDkimKey(input.algorithm), now })
  return {
    domain: key.domain,
    selector: key.selector,
    algorithm: key.algorithm,
    records: dnsRecords(key, config.nodeName, config.inbound?.returnPath ?? null),
  }
}

async function keysOf(deps: Deps, domain: string): Promise<DkimKey[]> {
  const keys = await deps.store.domains.keys(domain)
  if (!keys.length) throw new Error(`${domain} is not a sending domain`)
  return keys
}

const table = (records: DnsRecord[]) => records.map((r) => `${r.type}\t${r.name}\t${r.value}`).join('\n')

/** The SPF mechanism that names this relay (`a:<node name>`), as the record says it. */
const spfMechanism = (r: AddedKey) => r.records[1].value.split(' ')[1]

const addedText = (r: AddedKey) =>
  [
    `Publish these DNS records for ${r.domain} (type, name, value):`,
    table(r.records),
    '',
    `SPF: if ${r.domain} has a v=spf1 record already, add ${spfMechanism(r)} to it rather than publishing a second one.`,
    ...r.records
      .slice(3)
      .map(
        (rp) =>
          `Return path: ${rp.name} is the envelope sender of ${r.domain}'s mail once the domain receives (mailroom domain receive prints its MX record).`,
      ),
    'DKIM: a value longer than 255 characters is split by most DNS providers; in a zone file, write it as several quoted strings.',
    `Then run: mailroom domain check ${r.domain}`,
  ].join('\n')

const algorithmOption = () =>
  new Option('--algorithm <algorithm>', 'key type').choices(['rsa', 'ed25519']).default('rsa')

/** `domain`: an account's sending domains, their DKIM keys and the DNS records they need. */
export function addDomainCommands(program: Command): void {
  const domain = program.command('domain').description("Manage an account's sending domains (DKIM signing)")
  accountAction(
    domain
      .command('add')
      .description('Add a sending domain to an account: generates its DKIM key and prints the DNS records to publish')
      .argument('<domain>', 'the domain of the From addresses to sign', domainName)
      .addOption(accountOption())
      .option('--selector <selector>', 'the DKIM selector; default mr-<date>', selectorName)
      .addOption(algorithmOption()),
    (rt, o, name: string) =>
      addDomainKey(rt, { accountId: o.account, domain: name, selector: o.selector, algorithm: o.algorithm }),
    addedText,
  )
  accountAction(
    domain.command('list').description("List an account's sending domains and their keys").addOption(accountOption()),
    async (rt, o) => {
      const keys = await rt.store.domains.list(o.account)
      return keys.map((k) => ({
        domain: k.domain,
        selector: k.selector,
        algorithm: k.algorithm,
        // The oldest key of a domain signs; see store.domains.signingKey.
        signing: keys.find((other) => other.domain === k.domain) === k,
        created: new Date(k.createdAt).toISOString(),
      }))
    },
    (rows) =>
      rows
        .map((r) => `${r.domain}\t${r.selector}\t${r.algorithm}\t${r.signing ? 'signing' : 'waiting'}\t${r.created}`)
        .join('\n') || 'no sending domains',
  )
  accountAction(
    domain
      .command('receive')
      .description(
        'Make a sending domain of the account receive mail (its inboxes: mailroom inbox) and print the MX record to publish',
      )
      .argument('<domain>', 'the sending domain', domainName)
      .addOption(accountOption())
      .option('--catch-all', 'every address at the domain is an inbox')
      .option('--off', 'stop receiving: mail to it is refused; its inboxes and their messages are kept'),
    (rt, o, name: string) =>
      asAccount<{
        domain: string
        receiving: boolean
        catchAll: boolean
        mx: { type: 'MX'; name: string; value: string }
        returnPathMx?: { type: 'MX'; name: string; value: string }
      }>(rt, o.account, () => import('../tools/set-domain-receiving.js').then((m) => m.setDomainReceiving), {
        domain: name,
        receiving: !o.off,
        catchAll: !!o.catchAll,
      }),
    (r) =>
      r.receiving
        ? [
            `${r.domain} receives mail${r.catchAll ? ' at every address (catch-all)' : ' for its inboxes (mailroom inbox add)'}.`,
            `Publish ${r.returnPathMx ? 'these DNS records' : 'this DNS record'} (type, name, value):`,
            ...[r.mx, ...(r.returnPathMx ? [r.returnPathMx] : [])].map((x) => `${x.type}\t${x.name}\t${x.value}`),
            'The MX door must be reachable there on port 25 (MAILROOM_MX_HOSTNAME names this server).',
          ].join('\n')
        : `${r.domain} no longer receives mail; its inboxes and their messages are kept`,
  )
  adminAction(
    domain
      .command('rotate')
      .description('Add a new key to a sending domain; the old one signs until it is removed')
      .argument('<domain>', 'the sending domain', domainName)
      .option('--selector <selector>', 'the new DKIM selector; default mr-<date>', selectorName)
      .addOption(algorithmOption()),
    async (rt, o, name: string) => {
      const [signing] = await keysOf(rt, name)
      const added = await addDomainKey(rt, {
        accountId: signing.accountId,
        domain: name,
        selector: o.selector,
        algorithm: o.algorithm,
        rotate: true,
      })
      return { ...added, signing: signing.selector }
    },
    (r) =>
      `${addedText(r)}\nSelector ${r.signing} goes on signing until it is removed: once the check passes, run\nmailroom domain remove ${r.domain} --selector ${r.signing}`,
  )
  adminAction(
    domain
      .command('remove')
      .description('Remove a sending domain, or one of its keys: its mail goes out unsigned, or signed by the next key')
      .argument('<domain>', 'the sending domain', domainName)
      .option('--selector <selector>', 'remove only this key', selectorName),
    async (rt, o, name: string) => {
      await keysOf(rt, name)
      if (!(await rt.store.domains.remove(name, o.selector)))
        throw new Error(`${name} has no key with selector ${o.selector}`)
      const left = await rt.store.domains.keys(name)
      return { domain: name, removed: o.selector ?? 'domain', selectors: left.map((k) => k.selector) }
    },
    (r) =>
      r.selectors.length
        ? `key ${r.removed} of ${r.domain} removed; ${r.selectors[0]} signs now`
        : `${r.domain} removed: its mail goes out unsigned`,
  )
  adminAction(
    domain
      .command('check')
      .description(
        'Look the DNS records of a sending domain up (MAILROOM_DNS_SERVERS applies) and say which are published and match',
      )
      .argument('<domain>', 'the sending domain', domainName),
    async (rt, _o, name: string) => {
      const keys = await keysOf(rt, name)
      const { checkRecords, domainRecords, txtLookup } = await import('../relay/domain-check.js')
      const expected = domainRecords(keys, rt.config.nodeName, rt.config.inbound.returnPath)
      const records = await checkRecords(expected, txtLookup(rt.config.delivery.dnsServers))
      return { domain: name, ok: records.every((r) => r.matches), records }
    },
    (r) =>
      r.records
        .map(
          (c) =>
            `${c.matches ? 'ok' : c.published ? 'differs' : 'missing'}\t${c.type}\t${c.name}\t${c.matches ? '' : `expected: ${c.value}`}${c.published && !c.matches ? `; found: ${c.found.join(' | ')}` : ''}`,
        )
        .join('\n'),
  )
}
