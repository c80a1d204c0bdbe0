import type { QueueItem, Store } from '../storage/store.js'
import type { Attempt } from './mx-client.js'

/** How long a domain's receiving account is kept before it is looked up again. */
const LOOKUP_TTL_MS = 60_000

/**
 * The return paths of MAILROOM_RETURN_PATH (VERP): mail whose sender's domain is a receiving
 * domain of the message's account leaves with `b<sealed row id and MAC>@<label>.<domain>` as its
 * envelope sender, one per recipient, so that whatever comes back there after a `250` (a late
 * bounce, a complaint) names the message and the recipient it is about, whatever its own text says. The
 * label's domain has an MX record naming this server's MX door, which takes it
 * (relay/inbound/feedback.ts).
 */
export class ReturnPaths {
  private receiving = new Map<string, { accountId: number | null; expires: number }>()

  constructor(
    private readonly deps: {
      store: { inbound: Pick<Store['inbound'], 'recipient'>; queue: Pick<Store['queue'], 'returnPathToken'> }
      label: string | null
      clock: () => number
    },
  ) {}

  /** The return-path domain of a queued recipient's message, or null when it keeps its sender's. */
  async domainOf(item: Pick<QueueItem, 'envFrom' | 'accountId'>): Promise<string | null> {
    const { label } = this.deps
    const at = item.envFrom.lastIndexOf('@')
    if (!label || at < 0) return null
    const domain = item.envFrom.slice(at + 1).toLowerCase()
    const now = this.deps.clock()
    let known = this.receiving.get(domain)
    if (!known || known.expires <= now) {
      // postmaster@ a receiving domain is always an inbox of its account (storage/inbound.ts).
      const found = await this.deps.store.inbound.recipient(`postmaster@${domain}`, Number.POSITIVE_INFINITY)
      known = { accountId: found.kind === 'inbox' ? found.accountId : null, expires: now + LOOKUP_TTL_MS }
      this.receiving.set(domain, known)
    }
    return known.accountId === item.accountId ? `${label}.${domain}` : null
  }

  /** The envelope sender of one recipient's copy. */
  address(rowId: number, domain: string): string {
    return `${this.deps.store.queue.returnPathToken(rowId, domain)}@${domain}`
  }
}

/**
 * One transaction per recipient, each with its own return path, on the connections the MX client
 * keeps (the next transaction reuses the last one's): their replies as one attempt's. `sent`, which
 * frees the delivery's slot, is called once the last copy is out.
 */
export async function attemptEach<A extends Attempt>(
  items: Pick<QueueItem, 'id' | 'recipient'>[],
  from: (item: Pick<QueueItem, 'id'>) => string,
  attempt: (envelope: { from: string; to: string[] }, sent: () => void) => Promise<A>,
  sent: () => void,
): Promise<A> {
  const replies: Attempt['replies'] = new Map()
  let last: A | undefined
  for (const [n, item] of items.entries()) {
    last = await attempt({ from: from(item), to: [item.recipient] }, n === items.length - 1 ? sent : () => {})
    for (const [to, reply] of last.replies) replies.set(to, reply)
  }
  return { ...last!, replies }
}
