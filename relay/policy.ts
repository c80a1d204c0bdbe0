import { holderKey, holderLabel, type PolicyHolder, type SendPolicy, type Store } from '../storage/store.js'
import { senderAuthorized } from './deny-rules.js'
import { Refusal } from './refusal.js'

/**
 * A send policy's checks in the pipeline (docs/approval.md): which recipients the holder may send
 * to at all, how many sends per UTC hour and day, and which sends wait for a person's approval.
 * A send without a policy never comes here: nothing is read or counted for it.
 */

/** The policy a send is held to, and what it belongs to (the key, grant or order it was set on). */
export interface BoundPolicy {
  holder: PolicyHolder
  rules: SendPolicy
}

/**
 * Refuses a recipient outside the policy's allowedRecipients (an address, or `@domain`; none
 * listed: anyone). `field` is the input field it came from, for the refusal to name.
 */
export function checkAllowed(policy: BoundPolicy, recipient: string, field = 'to'): void {
  const allowed = policy.rules.allowedRecipients
  if (allowed.length === 0 || senderAuthorized(allowed, recipient)) return
  throw new Refusal(
    'recipient_not_allowed',
    403,
    `${field}: ${recipient} is not among the recipients ${holderLabel(policy.holder)} may send to (allowed: ${allowed.join(', ')})`,
    { code: 550, enhanced: '5.7.1' },
  )
}

/**
 * Counts the send in the holder's UTC hour and day, or refuses it with 429 (over SMTP a temporary
 * 451 4.7.1) when either is at its maximum, saying when the next send is possible. A refused send
 * is not counted. Without a maximum nothing is counted at all.
 */
export async function takeSend(store: Store, policy: BoundPolicy, now: number): Promise<void> {
  const { maxPerHour, maxPerDay } = policy.rules
  if (maxPerHour === null && maxPerDay === null) return
  const taken = await store.sendCounts.take({ holder: holderKey(policy.holder), now, maxPerHour, maxPerDay })
  if (taken.ok) return
  const wait = Math.max(1, Math.ceil((taken.freesAt - now) / 1000))
  const max = taken.period === 'hour' ? 'maxPerHour' : 'maxPerDay'
  throw new Refusal(
    'rate_limited',
    429,
    `${max} ${taken.limit} reached for ${holderLabel(policy.holder)}: the next send is possible at ${new Date(taken.freesAt).toISOString()} (in ${wait} s)`,
    { code: 451, enhanced: '4.7.1' },
    { 'Retry-After': String(wait) },
  )
}

/**
 * Why the send needs a person's approval, in words, or null when it may go at once: `always`,
 * more recipients than `approveAbove`, or (`new-recipients`) an address the account never had a
 * released delivery to. A recipient whose first message is still held is still new.
 */
export async function approvalReason(
  store: Store,
  accountId: number,
  policy: BoundPolicy,
  recipients: string[],
): Promise<string | null> {
  const { approval, approveAbove } = policy.rules
  const label = holderLabel(policy.holder)
  if (approval === 'always') return `every send of ${label} needs approval`
  const reasons: string[] = []
  if (approveAbove !== null && recipients.length > approveAbove)
    reasons.push(`${recipients.length} recipients, above the ${approveAbove} ${label} may send to without approval`)
  if (approval === 'new-recipients') {
    const addresses = [...new Set(recipients.map((r) => r.toLowerCase()))]
    const before = await store.mail.sentBefore(accountId, addresses)
    const fresh = addresses.filter((a) => !before.addresses.has(a))
    if (fresh.length) reasons.push(`first mail to ${firstMailTo(fresh, before.domains)}`)
  }
  return reasons.length ? reasons.join('; ') : null
}

/** The new recipients in words: a domain never sent to by its name, other addresses as they are. */
function firstMailTo(fresh: string[], knownDomains: Set<string>): string {
  const named = new Set<string>()
  for (const address of fresh) {
    const domain = address.slice(address.lastIndexOf('@') + 1)
    named.add(knownDomains.has(domain) ? address : domain)
  }
  return [...named].join(', ')
}

/** The URL of the console page that decides a held message (its id is the transaction id). */
export const approvalUrlOf = (publicUrl: string, txid: string) =>
  `${publicUrl}/console/approvals?id=${encodeURIComponent(txid)}`
