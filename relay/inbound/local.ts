import type { Logger } from 'pino'
import type { AuthVerdict, QueueItem, Store } from '../../storage/store.js'
import type { Attempt } from '../mx-client.js'
import type { Reply } from '../smtp-session.js'
import { withAuthResults } from './intake.js'
import { parseInbound } from './parse.js'

export interface LocalDeliveryDeps {
  inbound: Pick<Store['inbound'], 'recipient' | 'receive'>
  /** Bytes an inbox may hold (MAILROOM_INBOX_QUOTA), as the MX door asks at RCPT. */
  quota: number
  /** The authserv-id of the Authentication-Results header: the MX's public name, else the node's. */
  hostname: string
  logger: Logger
  clock: () => number
}

/** The mail of one account of this mailroom to another (or itself) never left: what the verdict says instead of SPF and DKIM. */
export function localVerdict(hostname: string, accountId: number, envFrom: string): AuthVerdict {
  const submitted = `submitted by authenticated account ${accountId} of this mailroom`
  return {
    spf: { result: 'none', domain: null },
    dkim: [],
    dmarc: { result: 'none', policy: null, domain: null },
    arc: { result: 'none' },
    local: submitted,
    // RFC 8601 §2.7.4: auth, the sender authenticated to this server (here, through an API key or SMTP AUTH).
    header: `${hostname}; auth=pass (${submitted}) smtp.mailfrom=${envFrom || '<>'}`,
  }
}

/**
 * Delivery to an inbox of this mailroom, without an MX round trip (no DNS lookup, no connection):
 * the attempt for recipients at a receiving domain, answered as the MX door would answer them (a
 * full inbox 452 4.2.2, an unknown address 550 5.1.1), or undefined when no account receives for
 * the domain and the mail goes out as any other. The message is parsed once and stored for each
 * receiving account; a store failure is a deferral, tried again like a busy destination.
 */
export async function localAttempt(
  deps: LocalDeliveryDeps,
  items: QueueItem[],
  bytes: () => Promise<Buffer | undefined>,
): Promise<Attempt | undefined> {
  const ask = (item: QueueItem) => deps.inbound.recipient(item.recipient.toLowerCase(), deps.quota)
  // One domain per group: the first recipient's answer is the domain's, and all most mail asks.
  const head = await ask(items[0])
  if (head.kind === 'not-receiving') return undefined
  const kinds = [head, ...(await Promise.all(items.slice(1).map(ask)))]
  const replies = new Map<string, Reply>()
  const byAccount = new Map<number, string[]>()
  items.forEach((item, n) => {
    const kind = kinds[n]
    const to = item.recipient
    if (kind.kind === 'inbox') byAccount.set(kind.accountId, [...(byAccount.get(kind.accountId) ?? []), to])
    else if (kind.kind === 'full')
      replies.set(to, { code: 452, response: `452 4.2.2 <${to}>: the inbox is full`, toRcpt: true })
    else replies.set(to, { code: 550, response: `550 5.1.1 <${to}>: no such inbox`, toRcpt: true })
  })
  if (byAccount.size) await store(deps, items[0], byAccount, bytes, replies)
  return { mxHostname: null, mxAddress: null, tls: null, replies }
}

async function store(
  deps: LocalDeliveryDeps,
  first: QueueItem,
  byAccount: Map<number, string[]>,
  bytes: () => Promise<Buffer | undefined>,
  replies: Map<string, Reply>,
): Promise<void> {
  const answer = (recipients: string[], reply: Reply) => {
    for (const to of recipients) replies.set(to, reply)
  }
  const raw = await bytes()
  if (!raw) {
    answer([...byAccount.values()].flat(), { code: 451, response: '451 4.3.0 the message is no longer queued' })
    return
  }
  const auth = localVerdict(deps.hostname, first.accountId, first.envFrom)
  const stored = withAuthResults(raw, auth.header, deps.hostname)
  const parsed = await parseInbound(raw, first.envFrom)
  for (const [accountId, recipients] of byAccount) {
    try {
      const rows = await deps.inbound.receive({
        accountId,
        recipients,
        mailFrom: first.envFrom,
        remoteAddress: 'local',
        receivedAt: deps.clock(),
        raw: stored,
        parsed,
        auth,
      })
      const ids = rows.map((r) => r.id).join(' ')
      answer(recipients, { code: 250, response: `250 2.0.0 delivered to the inbox as ${ids}`, toRcpt: true })
      deps.logger.info({ txid: first.txid, ids }, 'delivered to an inbox of this mailroom')
    } catch (err) {
      deps.logger.error({ err, txid: first.txid }, 'delivering to an inbox of this mailroom failed')
      answer(recipients, { code: 451, response: '451 4.3.0 the inbox could not store the message now' })
    }
  }
}
