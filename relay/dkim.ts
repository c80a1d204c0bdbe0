import { generateKeyPairSync } from 'node:crypto'
import type { DKIMSignOptions } from 'mailauth'
import { dkimSign } from 'mailauth/lib/dkim/sign.js'
import type { Logger } from 'pino'
import { joinPieces, type DkimAlgorithm, type SigningKey, type Store } from '../storage/store.js'

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
 * attention (`p=none`) while the other two are checked.
 */
export function dnsRecords(
  key: Pick<SigningKey, 'domain' | 'selector' | 'algorithm' | 'publicKey'>,
  nodeName: string,
): DnsRecord[] {
  return [
    {
      type: 'TXT',
      name: `${key.selector}._domainkey.${key.domain}`,
      value: `v=DKIM1; k=${key.algorithm}; p=${key.publicKey}`,
    },
    { type: 'TXT', name: key.domain, value: `v=spf1 a:${nodeName} ~all` },
    { type: 'TXT', name: `_dmarc.${key.domain}`, value: 'v=DMARC1; p=none; adkim=r; aspf=r' },
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
 * checks (mailauth's list: From, To, Cc, Subject, Date, Message-ID, MIME-Version, Content-*,
 * Reply-To, In-Reply-To, References, List-*…), never a Received line.
 */
export async function signMessage(
  deps: { store: Store; logger: Logger },
  input: { accountId: number; from: string | null; raw: Buffer[]; time: number; txid?: string },
): Promise<Buffer[]> {
  const key = input.from ? await signingKeyFor(deps.store, input.accountId, input.from) : undefined
  if (!key) return input.raw
  const message = withCrlf(joinPieces(input.raw))
  const { signatures, errors } = await dkimSign(message, {
    signTime: new Date(input.time),
    signatureData: [
      {
        signingDomain: key.domain,
        selector: key.selector,
        privateKey: key.privateKey,
        algorithm: `${key.algorithm}-sha256`,
        canonicalization: 'relaxed/relaxed',
      },
    ],
  } as DKIMSignOptions)
  if (errors.length || !signatures.trim()) {
    // A key that cannot sign is the operator's to fix; the message still goes, unsigned.
    deps.logger.error(
      {
        txid: input.txid,
        domain: key.domain,
        selector: key.selector,
        err: String((errors[0] as { err?: unknown } | undefined)?.err ?? 'no signature'),
      },
      'DKIM signing failed; sent unsigned',
    )
    return input.raw
  }
  return [Buffer.from(signatures), message]
}

/** The bytes with every bare CR and bare LF made CRLF (a copy only when one is there). */
export function withCrlf(raw: Buffer): Buffer {
  let lfs = 0
  for (let i = raw.indexOf(0x0a); i !== -1; i = raw.indexOf(0x0a, i + 1), lfs++)
    if (raw[i - 1] !== 0x0d) return fix(raw)
  let crs = 0
  for (let i = raw.indexOf(0x0d); i !== -1; i = raw.indexOf(0x0d, i + 1)) crs++
  return crs === lfs ? raw : fix(raw)
}

const fix = (raw: Buffer) => Buffer.from(raw.toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'), 'latin1')
