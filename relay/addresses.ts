// nodemailer's parser, an entry point its package exports with its types: the standalone
// `addressparser` package is its unmaintained 2016 copy (no quoted-pairs, no flatten), and a strict
// RFC 5322 grammar (`email-addresses`) would refuse inputs this one reads.
import addressparser from 'nodemailer/lib/addressparser'
import { badInput } from '../errors.js'

export interface Mailbox {
  name: string
  address: string
}

// RFC 5321 §4.1.2 mailbox, restricted to what relays accept in practice: a dot-atom or quoted
// local part (printable ASCII, `"` and `\` only escaped) and a domain with at least one dot. No
// address literal (`u@[192.0.2.1]`): delivery finds hosts by MX lookup only, and a literal would let
// a caller aim delivery at any address, the relay's own network included.
const ATOMS = /[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*/.source
const QUOTED = /"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])+"/.source
const LABELS = /(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}/.source
export const EMAIL_PATTERN = new RegExp(`^(?:${ATOMS}|${QUOTED})@${LABELS}$`)
const DOMAIN = new RegExp(`^${LABELS}$`)

export const isEmail = (s: string) => s.length <= 254 && EMAIL_PATTERN.test(s)

/** Whether a text is all ASCII (an address needs no SMTPUTF8, a domain no punycode). */
export const isAscii = (s: string) => /^[\x00-\x7f]*$/.test(s)

const DOT_ATOM = new RegExp(`^${ATOMS}$`)

/** A quoted-string (RFC 5322 §3.2.4): the text in quotes, `"` and `\` escaped. */
export const quoteString = (text: string) => `"${text.replace(/["\\]/g, '\\$&')}"`

/**
 * RFC 5321 §4.1.2: a quoted-pair stands for its character, and a quoted local part that needs no
 * quotes names the same mailbox as the bare one: `"bob"@example.com` and `"b\ob"@example.com` are
 * `bob@example.com`. The local part is unescaped, then written bare when it is a dot-atom, else
 * quoted with only `"` and `\` escaped, so that deny rules, block lists, traps and repeats see one
 * address whichever way it was written.
 */
export function canonicalAddress(address: string): string {
  const m = /^"((?:[^"\\]|\\[\s\S])*)"@([^@]+)$/.exec(address)
  if (!m) return address
  const local = m[1].replace(/\\([\s\S])/g, '$1')
  return `${DOT_ATOM.test(local) ? local : quoteString(local)}@${m[2]}`
}

/** An address at an IP address literal (`u@[192.0.2.1]`), which `isEmail` refuses. */
export const isAddressLiteral = (address: string) => /@\[[^\]]*\]$/.test(address)

/** Why an address that is not `isEmail` is refused, to follow it in a message: an address literal is named as such. */
export const notAnEmail = (address: string, otherwise = 'is not a valid email address') =>
  isAddressLiteral(address) ? 'is an address literal; mail goes only to addresses at a domain name' : otherwise

export const isDomain = (s: string) => s.length <= 253 && DOMAIN.test(s)

/**
 * An authorized sender of a mail order as stored (`user@example.com` or `@example.com`, lower
 * case, the address canonical: `"t\rap"@x` is trap@x, RFC 5321 §4.1.2), or undefined when the
 * text is neither.
 */
export function senderPatternOf(value: string): string | undefined {
  const v = value.trim().toLowerCase()
  if (v.startsWith('@')) return isDomain(v.slice(1)) ? v : undefined
  return isEmail(v) ? canonicalAddress(v) : undefined
}

/** An RFC 822 address string (bare or `Name <a@b>`, comma-separated) as mailboxes; groups are flattened. */
export function parseAddressString(value: string): Mailbox[] {
  return addressparser(value, { flatten: true }).map((a) => ({
    name: a.name ?? '',
    address: canonicalAddress((a.address ?? '').trim()),
  }))
}

/**
 * A contract address field (a string, a contact object, or an array of either) as checked
 * mailboxes. `field` names the input in the error message.
 */
export function toMailboxes(
  field: string,
  value: string | { email: string; name?: string } | (string | { email: string; name?: string })[],
): Mailbox[] {
  const items = Array.isArray(value) ? value : [value]
  // A line break would be read as the end of the field: `"a@x.com\r\nBcc: b@y.com"` parses as a
  // group named "a@x.com Bcc" whose one member is b@y.com (RFC 5322 §3.4).
  for (const item of items) {
    const texts = typeof item === 'string' ? [item] : [item.email, item.name ?? '']
    if (texts.some((t) => /[\r\n]/.test(t)))
      throw badInput(
        `${field}: an address or name holds a line break (CR or LF); write one address per item, or separate them with commas`,
      )
  }
  const boxes = items.flatMap((item) =>
    typeof item !== 'string'
      ? [{ name: item.name ?? '', address: canonicalAddress(item.email.trim()) }]
      : isEmail(item)
        ? [{ name: '', address: canonicalAddress(item) }]
        : parseAddressString(item),
  )
  for (const box of boxes) {
    if (!isEmail(box.address)) throw badInput(`${field}: "${box.address || String(value)}" ${notAnEmail(box.address)}`)
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
