import { createHash, createPrivateKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto'
import { domainToASCII } from 'node:url'
import type { Logger } from 'pino'
import { joinPieces, type DkimAlgorithm, type SigningKey, type Store } from '../storage/store.js'
import { hasOnlyCrlf } from './smtp-session.js'

/** A DNS record to publish, as a DNS provider's form asks for it. */
export interface DnsRecord {
  type: 'TXT'
  name: string
  value: string
}

/**
 * A new key pair: the private key as PKCS#8 PEM (what is stored, encrypted) and the public key
 * as the `p=` value of the DNS record. RSA 2048 is what every receiver verifies (RFC 8301 §3.2:
 * at least 1024, 2048 recommended); RFC 8463 §4.2: an Ed25519 `p=` is the bare 32-byte key, not
 * the SubjectPublicKeyInfo an RSA `p=` is.
 */
export function generateDkimKey(algorithm: DkimAlgorithm): { privateKey: string; publicKey: string } {
  if (algorithm === 'rsa') {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      publicKeyEncoding: { type: 'spki', format: 'der' },
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    })
    return { privateKey, publicKey: publicKey.toString('base64') }
  }
  const { publicKey, privateKey } = generateKeyPairSync('ed25519', {
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  })
  // An Ed25519 SubjectPublicKeyInfo is a 12-byte header and the 32-byte key.
  return { privateKey, publicKey: publicKey.subarray(12).toString('base64') }
}

/**
 * The records a sending domain needs: its DKIM key (RFC 6376 §3.6.1), an SPF policy (RFC 7208)
 * naming this relay's host, and a DMARC policy (RFC 7489) that only asks for reports' worth of
 * attention (`p=none`) while the other two are checked. With a return path (MAILROOM_RETURN_PATH),
 * the SPF policy of its domain too: SPF checks the envelope sender's domain, which is then that one.
 */
export function dnsRecords(
  key: Pick<SigningKey, 'domain' | 'selector' | 'algorithm' | 'publicKey'>,
  nodeName: string,
  returnPath: string | null = null,
): DnsRecord[] {
  const spf = `v=spf1 a:${nodeName} ~all`
  return [
    {
      type: 'TXT',
      name: `${key.selector}._domainkey.${key.domain}`,
      value: `v=DKIM1; k=${key.algorithm}; p=${key.publicKey}`,
    },
    { type: 'TXT', name: key.domain, value: spf },
    { type: 'TXT', name: `_dmarc.${key.domain}`, value: 'v=DMARC1; p=none; adkim=r; aspf=r' },
    ...(returnPath ? [{ type: 'TXT' as const, name: `${returnPath}.${key.domain}`, value: spf }] : []),
  ]
}

/** The domain of an address and its parents, most specific first (`a.b.example.com`, `b.example.com`, `example.com`). */
export function signingDomains(address: string): string[] {
  let domain = address
    .slice(address.lastIndexOf('@') + 1)
    .toLowerCase()
    .replace(/\.$/, '')
  const out: string[] = []
  while (domain.includes('.')) {
    out.push(domain)
    domain = domain.slice(domain.indexOf('.') + 1)
  }
  return out
}

/**
 * The key that signs mail of `account` from `address`: that of the most specific registered
 * domain among the address's domain and its parents, if the account has it. A domain another
 * account registered is never signed for, not even with a parent domain's key of this account.
 */
export async function signingKeyFor(store: Store, accountId: number, address: string): Promise<SigningKey | undefined> {
  for (const domain of signingDomains(address)) {
    const key = await store.domains.signingKey(domain)
    if (key) return key.accountId === accountId ? key : undefined
  }
  return undefined
}

/**
 * The message with a DKIM-Signature (relaxed/relaxed, RFC 6376 §3.4.2 and §3.4.4) in front, when
 * its From address's domain is a sending domain of the account; else the pieces as they are.
 * What is signed is what delivery sends: line ends are made CRLF first, as delivery would
 * (relay/smtp-session.ts), so that a lone CR cannot change the lines a receiver canonicalizes.
 * Signatures the message has already are kept byte for byte; ours covers the headers a receiver
 * checks (SIGNED_FIELDS), never a Received line.
 */
export async function signMessage(
  deps: { store: Store; logger: Logger },
  input: { accountId: number; from: string | null; raw: Buffer[]; time: number; txid?: string },
): Promise<Buffer[]> {
  const key = input.from ? await signingKeyFor(deps.store, input.accountId, input.from) : undefined
  if (!key) return input.raw
  const message = withCrlf(joinPieces(input.raw))
  try {
    return [Buffer.from(await dkimSignature(message, key, input.time), 'latin1'), message]
  } catch (err) {
    // A key that cannot sign is the operator's to fix; the message still goes, unsigned.
    deps.logger.error(
      { txid: input.txid, domain: key.domain, selector: key.selector, err: String(err) },
      'DKIM signing failed; sent unsigned',
    )
    return input.raw
  }
}

/**
 * The header fields a signature covers: those a receiver checks, as mailauth signs them by
 * default (its `defaultDKIMFieldNames`). Never a Received line: relays on the way add theirs.
 */
const SIGNED_FIELDS = new Set([
  'from',
  'sender',
  'reply-to',
  'subject',
  'date',
  'message-id',
  'to',
  'cc',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-id',
  'content-description',
  'resent-date',
  'resent-from',
  'resent-sender',
  'resent-to',
  'resent-cc',
  'resent-message-id',
  'in-reply-to',
  'references',
  'list-id',
  'list-help',
  'list-unsubscribe',
  'list-subscribe',
  'list-post',
  'list-owner',
  'list-archive',
  'list-unsubscribe-post',
  'bimi-selector',
])

/**
 * The fields signed once more than they occur (RFC 6376 §5.4.2 and §8.15): a name in h= with no
 * instance left to pair with signs the absence of one more, so that a field added after signing (a
 * second From or Subject shown instead of ours, a List-Unsubscribe pointing elsewhere) breaks the
 * signature. A field the message lacks is signed as absent. RFC 8058 §4: List-Unsubscribe and
 * List-Unsubscribe-Post are covered by the signature.
 */
const OVERSIGNED = ['From', 'To', 'Subject', 'Date', 'Message-ID', 'List-Unsubscribe', 'List-Unsubscribe-Post']

/**
 * The DKIM-Signature header field (RFC 6376 §3.5) of a message with CRLF line ends, folded, with
 * its CRLF, as latin1 (the message's bytes one for one). Every instance of a signed field is
 * signed, the last first: a verifier pairs the names in h= with instances from the bottom up
 * (RFC 6376 §5.4.2); then each of OVERSIGNED once more, which pairs with nothing and adds nothing
 * to the data signed.
 */
export async function dkimSignature(message: Buffer, key: SigningKey, time: number): Promise<string> {
  const { fields, body } = splitMessage(message)
  const signed = fields.filter((f) => SIGNED_FIELDS.has(fieldName(f).toLowerCase())).reverse()
  // RFC 6376 §5.4: the From field is always signed; a message without one is not ours to vouch for.
  if (!signed.some((f) => fieldName(f).toLowerCase() === 'from')) throw new Error('no From field to sign')
  const bh = createHash('sha256').update(relaxedBody(body), 'latin1').digest('base64')
  const line = foldedLine('DKIM-Signature:')
  const d = domainToASCII(key.domain)
  const tags = ['v=1;', `a=${key.algorithm}-sha256;`, 'c=relaxed/relaxed;', `d=${d};`, `s=${key.selector};`]
  for (const tag of [...tags, `t=${Math.floor(time / 1000)};`]) line.add(tag, ' ')
  // RFC 6376 §3.5: h= may fold after each colon.
  const names = [...signed.map(fieldName), ...OVERSIGNED]
  for (const [i, name] of names.entries())
    line.add(`${i ? '' : 'h='}${name}${i < names.length - 1 ? ':' : ';'}`, i ? '' : ' ')
  line.add(`bh=${bh};`, ' ')
  line.add('b=', ' ')
  // RFC 6376 §3.7: the signature's own field is hashed last, b= empty and without its CRLF.
  const data = Buffer.from(signed.map(relaxedHeader).join('') + relaxedHeader(line.text()).slice(0, -2), 'latin1')
  const b = (await signData(data, key)).toString('base64')
  // RFC 6376 §3.5: b= may fold anywhere; lines of at most 78 characters (RFC 5322 §2.1.1).
  for (let i = 0; i < b.length; ) {
    const n = Math.max(line.room(), 1)
    line.add(b.slice(i, i + n), '')
    i += n
  }
  return `${line.text()}\r\n`
}

/**
 * RFC 6376 §3.3.1 and RFC 8463 §3: RSA signs the SHA-256 of the data, Ed25519 signs that hash as
 * its message. In Node's thread pool: an RSA 2048 signature is most of what signing costs, and the
 * event loop takes the next request meanwhile.
 */
function signData(data: Buffer, key: SigningKey): Promise<Buffer> {
  const privateKey = parsedKey(key)
  const [algorithm, input] =
    key.algorithm === 'ed25519' ? [null, createHash('sha256').update(data).digest()] : ['sha256', data]
  return new Promise((resolve, reject) =>
    sign(algorithm, input, privateKey, (err, signature) => (err ? reject(err) : resolve(signature))),
  )
}

/**
 * Parsed private keys by domain and selector: parsing a PEM costs more than an RSA signature. A
 * (domain, selector) keeps its key for life; the PEM is compared anyway, so a key removed and
 * added again under the same selector is never signed with the old one.
 */
const parsedKeys = new Map<string, { pem: string; key: KeyObject }>()

function parsedKey({ domain, selector, privateKey: pem }: SigningKey): KeyObject {
  const id = `${selector}._domainkey.${domain}`
  const hit = parsedKeys.get(id)
  if (hit?.pem === pem) return hit.key
  if (parsedKeys.size >= 1000) parsedKeys.clear()
  const key = createPrivateKey(pem)
  parsedKeys.set(id, { pem, key })
  return key
}

/** A header field's lines, folded before a piece that would pass 78 characters. */
function foldedLine(start: string) {
  let text = start
  let column = start.length
  return {
    add(piece: string, space: string) {
      const fold = column + space.length + piece.length > 78 && column > 1
      text += fold ? `\r\n ${piece}` : `${space}${piece}`
      column = (fold ? 1 : column + space.length) + piece.length
    },
    room: () => 78 - column,
    text: () => text,
  }
}

/**
 * The header fields of a message (each with its folded lines, without its last CRLF) and its
 * body. RFC 5322 §2.2.3: a line that begins with a space or a tab continues the field above it.
 * A message without an empty line is all header, its body empty.
 */
function splitMessage(message: Buffer): { fields: string[]; body: Buffer } {
  if (message[0] === 0x0d && message[1] === 0x0a) return { fields: [], body: message.subarray(2) }
  const end = message.indexOf('\r\n\r\n')
  const head = message.toString('latin1', 0, end === -1 ? message.length : end)
  const body = end === -1 ? message.subarray(message.length) : message.subarray(end + 4)
  return { fields: head.split(/\r\n(?![ \t])/).filter((f) => f), body }
}

const fieldName = (field: string) => field.slice(0, field.indexOf(':')).trim()

/**
 * RFC 6376 §3.4.2: a header field in the relaxed form, with its CRLF: the name in lower case,
 * unfolded, every run of spaces and tabs one space, none at the ends of the value or around the
 * colon. Only spaces and tabs: an 8-bit byte such as 0xA0 is kept.
 */
export function relaxedHeader(field: string): string {
  const colon = field.indexOf(':')
  const value = field
    .slice(colon + 1)
    .replace(/\r\n/g, '')
    .replace(/[ \t]+/g, ' ')
  const start = value.startsWith(' ') ? 1 : 0
  const end = value.endsWith(' ') && value.length > start ? value.length - 1 : value.length
  return `${field.slice(0, colon).trim().toLowerCase()}:${value.slice(start, end)}\r\n`
}

/**
 * RFC 6376 §3.4.4: a body with CRLF line ends in the relaxed form, as latin1: every run of spaces
 * and tabs one space, none at the end of a line, no empty line at the end, and a CRLF after the
 * last line unless the body is empty (an empty body stays empty, unlike the simple form's CRLF).
 */
export function relaxedBody(body: Buffer): string {
  // Two linear passes: one expression for runs at a line's end (/[ \t]+(?=\r\n)/) would backtrack
  // over every long run elsewhere, quadratic in its length.
  const text = body
    .toString('latin1')
    .replace(/[ \t]{2,}|\t/g, ' ')
    .replace(/ \r\n/g, '\r\n')
  let end = text.endsWith(' ') ? text.length - 1 : text.length
  while (end >= 2 && text.charCodeAt(end - 1) === 0x0a && text.charCodeAt(end - 2) === 0x0d) end -= 2
  return end ? `${text.slice(0, end)}\r\n` : ''
}

/** The bytes with every bare CR and bare LF made CRLF (a copy only when one is there). */
export const withCrlf = (raw: Buffer): Buffer =>
  hasOnlyCrlf(raw) ? raw : Buffer.from(raw.toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'), 'latin1')
