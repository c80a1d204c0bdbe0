import type { DenyRule, RuleType } from '../storage/store.js'

const localPart = (address: string) => address.slice(0, address.lastIndexOf('@'))
const domainPart = (address: string) => address.slice(address.lastIndexOf('@') + 1)

/**
 * What each deny rule type matches. Rule data is stored lower case and addresses are lowered
 * before matching: rules are case-insensitive.
 */
export const RULE_TYPES: Record<
  RuleType,
  { on: 'sender' | 'recipient'; matches: (data: string, address: string) => boolean }
> = {
  email: { on: 'sender', matches: (data, address) => address === data },
  domain: { on: 'sender', matches: (data, address) => domainPart(address) === data },
  startswith: { on: 'sender', matches: (data, address) => localPart(address).startsWith(data) },
  destination: { on: 'recipient', matches: (data, address) => address === data },
}

/** The first rule of `on` kind that matches the address, if any. */
export function findDenyRule(rules: DenyRule[], on: 'sender' | 'recipient', address: string): DenyRule | undefined {
  const lower = address.toLowerCase()
  return rules.find((r) => RULE_TYPES[r.type].on === on && RULE_TYPES[r.type].matches(r.data, lower))
}

/** An order's authorized senders: exact addresses or `@domain`; an empty list allows any sender. */
export function senderAuthorized(patterns: string[], address: string): boolean {
  if (patterns.length === 0) return true
  const lower = address.toLowerCase()
  return patterns.some((p) => (p.startsWith('@') ? domainPart(lower) === p.slice(1) : lower === p))
}
