import addressparser from 'nodemailer/lib/addressparser'
import { badInput } from '../errors.js'

export interface Mailbox {
  name: string
  address: string
}

// RFC 5321 §4.1.2 mailbox, restricted to what relays accept in practice: a dot-atom or quoted
// local part (printable ASCII, `"` and `\` only escaped) and a domain with at least one dot (or a
// bracketed address literal).
export const EMAIL_PATTERN = /^(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])+")@(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}|\[[0-9A-Fa-f:.]+\])$/
const DOMAIN = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}$/

export const isEmail = (s: string) => s.length <= 254 && EMAIL_PATTERN.test(s)

/** Whether a text is all ASCII (an address needs no SMTPUTF8, a domain no punycode). */
export const isAscii = (s: string) => /^[\x00-\x7f]*$/.test(s)

const DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/

/**
 * RFC 5321 §4.1.2: a quoted local part that needs no quotes (`"bob"@example.com`) names the same
 * mailbox as the bare one, and is written bare, so that deny rules, block lists and repeats see
 * one address whichever way it was written.
 */
export function canonicalAddress(address: string): string {
  const m = /^"([^"\\]*)"@([^@]+)$/.exec(address)
  return m && DOT_ATOM.test(m[1]) ? `${m[1]}@${m[2]}` : address
}
export const isDomain = (s: string) => s.length <= 253 && DOMAIN.test(s)

/** An RFC 822 address string (bare or `Name <a@b>`, comma-separated) as mailboxes; groups are flattened. */
export function parseAddressString(value: string): Mailbox[] {
  return addressparser(value, { flatten: true }).map((a) => ({ name: a.name ?? '', address: canonicalAddress((a.address ?? '').trim()) }))
}

/**
 * A contract address field (a string, a contact object, or an array of either) as checked
 * mailboxes. `field` names the input in the error message.
 */
export function toMailboxes(field: string, value: string | { email: string; name?: string } | (string | { email: string; name?: string })[]): Mailbox[] {
  const items = Array.isArray(value) ? value : [value]
  const boxes = items.flatMap((item) =>
    typeof item !== 'string' ? [{ name: item.name ?? '', address: canonicalAddress(item.email.trim()) }] : isEmail(item) ? [{ name: '', address: canonicalAddress(item) }] : parseAddressString(item),
  )
  for (const box of boxes) {
    if (!isEmail(box.address)) throw badInput(`${field}: "${box.address || String(value)}" is not a valid email address`)
  }
  return boxes
}

/** Recipients without repeats (case-insensitive), first spelling kept. */
export function uniqueAddresses(addresses: string[]): string[] {
  const seen = new Set<string>()
  return addresses.filter((a) => {
    const key = a.toLowerCase()
    return seen.has(key) ? false : (seen.add(key), true)
  })
}
