/**
 * MTA-STS (RFC 8461): a recipient domain's outbound TLS policy, found from its `_mta-sts` TXT
 * record and its HTTPS policy file, kept in the store for its max_age (shared by every node).
 * mailauth parses the record and the file; the fetch is ours, to apply the private-address rules
 * of webhooks and to stay within bounds a hostile policy host cannot push past.
 */
import { request, type RequestOptions } from 'node:https'
import type { SecureContext } from 'node:tls'
import type { Logger } from 'pino'
import type { CachedStsPolicy, StsMode, Store } from '../storage/store.js'
import { namesHost, type TlsResultType } from './mx-certificate.js'
import type { MxHost, MxResolver } from './routes.js'
import { addressesFor, pinnedLookup } from './webhook-post.js'

/** RFC 8461 §3.3: a policy file is at most 64 KB; a longer answer is cut off and refused. */
export const MAX_POLICY_BYTES = 64 * 1024
/** How long the fetch of a policy may take in all, from the lookup to the last byte. */
export const POLICY_FETCH_TIMEOUT_MS = 10_000
/** RFC 8461 §3.2: max_age is at most 31557600 seconds (a year). */
const MAX_AGE_LIMIT = 31_557_600
/** How long a lookup's answer (a TXT record and the policy it led to) is reused by this node. */
const LOOKUP_TTL_MS = 60_000
/** Most domains whose answers are remembered at once; past it they are forgotten, all of them. */
const LOOKUP_CACHE_MAX = 10_000

/** The policy that applies to a delivery: `none`, or a policy of a domain in `testing` or `enforce` mode. */
export type AppliedPolicy =
  | { mode: 'none'; domain: string }
  | { mode: Exclude<StsMode, 'none'>; domain: string; policy: CachedStsPolicy }

/** A policy that could not be had, with what a TLS report calls it (RFC 8460 §4.3.2.2). */
export class PolicyFetchError extends Error {
  constructor(
    readonly resultType: TlsResultType,
    message: string,
  ) {
    super(message)
  }
}

/** mailauth's MTA-STS helpers, loaded at the first domain that has a record: the engine thread starts without mailauth. */
type MtaSts = typeof import('mailauth/lib/mta-sts.js')
let helpers: Promise<MtaSts> | undefined
const mtaSts = () => (helpers ??= import('mailauth/lib/mta-sts.js'))

export interface PolicyDeps {
  store: Pick<Store, 'tlsPolicy'>
  resolver: MxResolver
  logger: Logger
  clock: () => number
  /** Policy hosts at non-public addresses are fetched from (MAILROOM_ALLOW_PRIVATE_WEBHOOKS, as webhooks). */
  allowPrivate: boolean
  secureContext?: SecureContext
  /** The policy host's port: 443 (RFC 8461 §3.3); tests serve elsewhere. */
  port?: number
  /** How long a fetch may take: POLICY_FETCH_TIMEOUT_MS unless a test waits less. */
  fetchTimeout?: number
  /** Told of each failure a TLS report counts: a fetch that failed, an MX host the policy does not list. */
  failed?: (domain: string, resultType: TlsResultType, mxHost: string) => void
}

/** The hosts a delivery may use under a domain's policy, or why it may use none (a transient refusal). */
export type PolicyPlan =
  | { policy: AppliedPolicy; hosts: MxHost[]; unlisted: string[] }
  | { policy?: AppliedPolicy; refusal: string }

/**
 * The MTA-STS policies of recipient domains, as a delivery needs them. RFC 8461 §5.1: a cached
 * policy is used until it expires, even when the TXT record goes or the fetch fails; a new id in
 * the TXT record makes it fetched again. A domain without a record, or whose only policy could
 * not be fetched, has none.
 */
export class StsPolicies {
  private answers = new Map<string, { applied: Promise<AppliedPolicy>; expires: number }>()

  constructor(private readonly deps: PolicyDeps) {}

  /** The policy that applies to mail for `domain` now (one lookup per domain at a time, reused a minute). */
  lookUp(domain: string): Promise<AppliedPolicy> {
    const now = this.deps.clock()
    const known = this.answers.get(domain)
    if (known && known.expires > now) return known.applied
    if (this.answers.size >= LOOKUP_CACHE_MAX) this.answers.clear()
    const applied = this.find(domain.toLowerCase(), now)
    const entry = { applied, expires: now + LOOKUP_TTL_MS }
    this.answers.set(domain, entry)
    // A lookup that failed (the store unreachable) is not reused: the next delivery asks again.
    applied.catch(() => this.answers.get(domain) === entry && this.answers.delete(domain))
    return applied
  }

  /**
   * The domain's policy and the hosts of its route it lets a delivery use (RFC 8461 §4.1): under
   * `enforce` only those its `mx` patterns list (the others are counted as failures, not tried);
   * under `testing` all, `unlisted` naming those a TLS report counts as failed whatever their
   * session. When none is left, or the policy could not be looked up, why not.
   */
  async plan(domain: string, hosts: MxHost[]): Promise<PolicyPlan> {
    let policy: AppliedPolicy
    try {
      policy = await this.lookUp(domain)
    } catch (err) {
      this.deps.logger.error({ err, domain }, 'MTA-STS: looking up the policy failed')
      return { refusal: `4.4.3 the MTA-STS policy of ${domain} could not be looked up; tried again later` }
    }
    if (policy.mode === 'none') return { policy, hosts, unlisted: [] }
    const { validateMx } = await mtaSts()
    const unlisted = hosts.filter((h) => !validateMx(h.name, policy.policy as never).valid).map((h) => h.name)
    if (policy.mode === 'testing') return { policy, hosts, unlisted }
    for (const host of unlisted) this.deps.failed?.(domain, 'validation-failure', host)
    const listed = hosts.filter((h) => !unlisted.includes(h.name))
    if (listed.length) return { policy, hosts: listed, unlisted: [] }
    return {
      policy,
      refusal: `4.7.5 MTA-STS policy of ${domain} (enforce): no MX host of ${domain} is listed in the policy (${unlisted.join(', ')} not in mx: ${policy.policy.mx.join(', ')})`,
    }
  }

  private async find(domain: string, now: number): Promise<AppliedPolicy> {
    const { store, logger } = this.deps
    const cached = await store.tlsPolicy.policy(domain)
    const live = cached && cached.expiresAt > now ? cached : undefined
    let id: string | false
    try {
      id = await this.recordId(domain)
    } catch (err) {
      logger.warn({ domain, err: String(err) }, 'MTA-STS: the TXT lookup failed; the cached policy, if any, applies')
      return applies(domain, live)
    }
    // RFC 8461 §5.1: without a record, a cached policy still applies until it expires.
    if (id === false) return applies(domain, live)
    if (live && live.id === id) return applies(domain, live)
    let policy: CachedStsPolicy
    try {
      policy = await this.fetch(domain, id, now)
    } catch (err) {
      const failure =
        err instanceof PolicyFetchError ? err : new PolicyFetchError('sts-policy-fetch-error', String(err))
      this.deps.failed?.(domain, failure.resultType, '')
      logger.warn(
        { domain, err: failure.message },
        'MTA-STS: fetching the policy failed; the cached policy, if any, applies',
      )
      return applies(domain, live)
    }
    // Not kept, it is fetched again by the next lookup; meanwhile it applies all the same.
    await store.tlsPolicy
      .savePolicy(policy)
      .catch((err) => logger.error({ err, domain }, 'MTA-STS: keeping the policy fetched failed'))
    return applies(domain, policy)
  }

  /** The id of the domain's `_mta-sts` record, or false when it has none (RFC 8461 §3.1). */
  private async recordId(domain: string): Promise<string | false> {
    const { resolver } = this.deps
    if (!resolver.resolveTxt) return false
    const resolveTxt = resolver.resolveTxt.bind(resolver)
    const { resolvePolicy } = await mtaSts()
    return resolvePolicy(domain, { resolver: (name: string) => resolveTxt(name) } as never)
  }

  /** Fetches and parses the policy file (RFC 8461 §3.3), within POLICY_FETCH_TIMEOUT_MS and MAX_POLICY_BYTES. */
  private async fetch(domain: string, id: string, now: number): Promise<CachedStsPolicy> {
    const text = await fetchPolicyFile(domain, this.deps)
    const { parsePolicy } = await mtaSts()
    let parsed: { mode?: string; mx?: string[]; maxAge?: number }
    try {
      parsed = parsePolicy(text) as typeof parsed
    } catch (err) {
      throw new PolicyFetchError(
        'sts-policy-invalid',
        `the policy of ${domain} is not valid: ${(err as Error).message}`,
      )
    }
    const maxAge = Math.min(parsed.maxAge ?? 0, MAX_AGE_LIMIT)
    return {
      domain,
      id,
      mode: parsed.mode as StsMode,
      mx: parsed.mx ?? [],
      maxAge,
      text,
      fetchedAt: now,
      expiresAt: now + maxAge * 1000,
    }
  }
}

const applies = (domain: string, policy: CachedStsPolicy | undefined): AppliedPolicy =>
  policy && policy.mode !== 'none' ? { mode: policy.mode, domain, policy } : { mode: 'none', domain }

/**
 * GET https://mta-sts.<domain>/.well-known/mta-sts.txt, as RFC 8461 §3.3 asks: a certificate
 * valid for that name, no redirect followed, 200 only; and as a hostile host cannot abuse: the
 * addresses checked as webhooks' are (and connected to, no second lookup), the whole fetch within
 * POLICY_FETCH_TIMEOUT_MS, the body within MAX_POLICY_BYTES (a longer one is cut off, not read).
 */
export async function fetchPolicyFile(
  domain: string,
  deps: Pick<PolicyDeps, 'resolver' | 'allowPrivate' | 'secureContext' | 'port' | 'fetchTimeout'>,
): Promise<string> {
  const host = `mta-sts.${domain}`
  const failed = (why: string) => new PolicyFetchError('sts-policy-fetch-error', `${host}: ${why}`)
  const timeout = deps.fetchTimeout ?? POLICY_FETCH_TIMEOUT_MS
  const deadline = AbortSignal.timeout(timeout)
  let address: string
  try {
    // The lookup counts against the same deadline as the fetch.
    ;[address] = await Promise.race([
      addressesFor(host, deps.resolver, deps.allowPrivate),
      new Promise<never>((_, reject) =>
        deadline.addEventListener('abort', () => reject(new Error(`no address within ${timeout} ms`)), { once: true }),
      ),
    ])
  } catch (err) {
    throw failed((err as Error).message)
  }
  const options: RequestOptions = {
    host,
    port: deps.port ?? 443,
    path: '/.well-known/mta-sts.txt',
    method: 'GET',
    servername: host,
    lookup: pinnedLookup(address),
    agent: false,
    signal: deadline,
    rejectUnauthorized: true,
    // RFC 8461 §3.3: the policy host's certificate is checked as an MX's (§4.2): DNS-ID subjectAltNames only.
    checkServerIdentity: (name, cert) =>
      namesHost(cert.raw, name) ? undefined : new Error(`the certificate is not for ${name} (no such subjectAltName)`),
    ...(deps.secureContext ? { secureContext: deps.secureContext } : {}),
    headers: { accept: 'text/plain' },
  }
  return new Promise<string>((resolve, reject) => {
    const req = request(options, (res) => {
      const status = res.statusCode ?? 0
      // RFC 8461 §3.3: redirects are not followed; any answer but 200 is no policy.
      if (status !== 200) {
        res.destroy()
        const where = status >= 300 && status < 400 ? ' (a redirect, which is not followed)' : ''
        return reject(failed(`answered HTTP ${status}${where}`))
      }
      const chunks: Buffer[] = []
      let size = 0
      res.on('data', (chunk: Buffer) => {
        size += chunk.length
        if (size > MAX_POLICY_BYTES) {
          res.destroy()
          reject(failed(`the policy file is larger than ${MAX_POLICY_BYTES / 1024} KB`))
        } else chunks.push(chunk)
      })
      res.on('error', (err) => reject(failed(err.message)))
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
      // After the end this changes nothing; before it, the body was cut off (or the deadline passed).
      res.on('close', () =>
        reject(failed(deadline.aborted ? `no policy within ${timeout / 1000} s` : 'the connection closed mid-policy')),
      )
    })
    req.on('error', (err) => {
      if (deadline.aborted) return reject(failed(`no policy within ${timeout / 1000} s`))
      const code = (err as NodeJS.ErrnoException).code ?? ''
      // RFC 8460 §4.3.2.2: a policy host whose certificate is not valid is sts-webpki-invalid.
      const webpki = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS_CERT_ALTNAME/.test(code)
      reject(new PolicyFetchError(webpki ? 'sts-webpki-invalid' : 'sts-policy-fetch-error', `${host}: ${err.message}`))
    })
    req.end()
  })
}
