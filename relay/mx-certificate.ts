import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { createSecureContext, rootCertificates, type SecureContext, type TLSSocket } from 'node:tls'
import { ConfigError } from '../config.js'

/** Characters of the names a certificate is for, quoted in a reply. */
const MAX_NAMES = 200

/**
 * What the MX certificate proved, as a TLS report names a failure (RFC 8460 §4.3): valid, or the
 * result type and, for a reply, what was wrong with it (`presented a certificate for other.example`).
 */
export type CertificateCheck = { valid: true } | { valid: false; resultType: TlsResultType; detail: string }

/** The failures of a session a TLS report counts (RFC 8460 §4.3.2.1), and of a policy fetch (§4.3.2.2). */
export type TlsResultType =
  | 'starttls-not-supported'
  | 'certificate-host-mismatch'
  | 'certificate-expired'
  | 'certificate-not-trusted'
  | 'validation-failure'
  | 'sts-policy-fetch-error'
  | 'sts-policy-invalid'
  | 'sts-webpki-invalid'

/** OpenSSL's verification errors that mean "no trusted issuer" (the rest are other validation failures). */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
])

/**
 * Whether a certificate is for `host`: RFC 8461 §4.2 (RFC 6125 §6.4) takes only its DNS-ID
 * subjectAltNames (never the CN), a wildcard only as the whole left-most label; an IP address
 * (a smarthost given as one) by its IP subjectAltNames.
 */
export function namesHost(raw: Buffer, host: string): boolean {
  try {
    const x509 = new X509Certificate(raw)
    if (isIP(host)) return x509.checkIP(host) !== undefined
    return (
      x509.checkHost(host, {
        subject: 'never',
        wildcards: true,
        partialWildcards: false,
        multiLabelWildcards: false,
        singleLabelSubdomains: false,
      }) !== undefined
    )
  } catch {
    return false
  }
}

/**
 * Checks a TLS peer's certificate for `hostname` (RFC 8461 §4.2, RFC 6125): the name first (the
 * most telling failure), then the chain to a trusted CA and its dates.
 */
export function checkCertificate(socket: TLSSocket, hostname: string): CertificateCheck {
  const cert = socket.getPeerCertificate()
  if (!cert || Object.keys(cert).length === 0)
    return { valid: false, resultType: 'validation-failure', detail: 'presented no certificate' }
  if (!namesHost(cert.raw, hostname)) {
    const names = (cert.subjectaltname ?? '')
      .split(', ')
      .filter((n) => n.startsWith('DNS:'))
      .map((n) => n.slice(4))
    const shown = names.length ? names : cert.subject?.CN ? [String(cert.subject.CN)] : []
    return {
      valid: false,
      resultType: 'certificate-host-mismatch',
      detail: `presented a certificate for ${shown.length ? shown.join(', ').slice(0, MAX_NAMES) : 'no name'}`,
    }
  }
  if (socket.authorized) return { valid: true }
  const code = String((socket.authorizationError as unknown as { code?: string })?.code ?? socket.authorizationError)
  if (code === 'CERT_HAS_EXPIRED')
    return { valid: false, resultType: 'certificate-expired', detail: 'presented an expired certificate' }
  if (UNTRUSTED.has(code))
    return {
      valid: false,
      resultType: 'certificate-not-trusted',
      detail: `presented a certificate no trusted CA issued (${code})`,
    }
  return {
    valid: false,
    resultType: 'validation-failure',
    detail: `presented a certificate that failed validation (${code})`,
  }
}

/**
 * The CAs outbound TLS trusts (MX hosts, MTA-STS policy hosts): the system's, and the operator's
 * own when MAILROOM_OUTBOUND_CA names a PEM file (a private CA, a test CA); undefined for the
 * system's alone. Read once, when delivery starts.
 */
export function outboundContext(caFile: string | null): SecureContext | undefined {
  if (!caFile) return undefined
  try {
    return createSecureContext({ ca: [...rootCertificates, readFileSync(caFile, 'utf8')] })
  } catch (err) {
    throw new ConfigError(`cannot use ${caFile} as a CA (MAILROOM_OUTBOUND_CA): ${(err as Error).message}`)
  }
}
