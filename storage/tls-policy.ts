/**
 * Outbound TLS policy records (Store['tlsPolicy']): MTA-STS policies as fetched (RFC 8461) and
 * the TLS-RPT counts of sessions (RFC 8460), both shared by every node of a database.
 */

/** An MTA-STS policy mode (RFC 8461 §5). */
export type StsMode = 'none' | 'testing' | 'enforce'

/** A policy as fetched from `https://mta-sts.<domain>/.well-known/mta-sts.txt`. */
export interface CachedStsPolicy {
  /** The policy domain (the recipient domain), lower case. */
  domain: string
  /** The `id` of the `_mta-sts` TXT record it was fetched under (RFC 8461 §3.1). */
  id: string
  mode: StsMode
  /** The `mx` patterns (`mx.example.com`, `*.example.net`). */
  mx: string[]
  /** Seconds, as the policy says (RFC 8461 §3.2). */
  maxAge: number
  /** The policy file's text: a TLS report quotes it (RFC 8460 §4.3, policy-string). */
  text: string
  fetchedAt: number
  /** When it stops being used without a fresh fetch: fetchedAt + max_age. */
  expiresAt: number
}

/** Sessions of one kind toward one policy domain in one UTC day (RFC 8460 §4.3). */
export interface TlsResultCount {
  domain: string
  /** The UTC day's start (ms). */
  day: number
  /** `sts` when an MTA-STS policy applied, `no-policy-found` when none could be (RFC 8460 §4.3). */
  policyType: 'sts' | 'no-policy-found'
  /** `success`, or the failure's result type (`certificate-host-mismatch`, `starttls-not-supported`, …). */
  resultType: string
  /** The receiving MX host; '' when none was reached. */
  mxHost: string
  count: number
}

export interface TlsPolicyStore {
  /** The policy cached for a domain, expired or not; undefined when none was ever fetched. */
  policy(domain: string): Promise<CachedStsPolicy | undefined>
  /** Keeps a policy fetched now, in place of the domain's previous one. */
  savePolicy(policy: CachedStsPolicy): Promise<void>
  /** Adds counts, atomically across nodes (several nodes count the same domain and day). */
  count(rows: TlsResultCount[]): Promise<void>
  /** The domains and days with counts that no node has claimed the report of, for days before `before`. */
  unreported(before: number): Promise<{ domain: string; day: number }[]>
  /**
   * Claims the report of a domain and day, once across nodes: the first caller gets its counts
   * (which go with the claim), every later one undefined.
   */
  claimReport(input: { domain: string; day: number; node: string; now: number }): Promise<TlsResultCount[] | undefined>
  /**
   * Deletes the claims, and counts left behind (counted after their report), of days before
   * `before`, and the policies that expired before it (no longer used: RFC 8461 §5.1), however
   * many domains were ever mailed; returns how many rows went.
   */
  prune(before: number): Promise<number>
}
