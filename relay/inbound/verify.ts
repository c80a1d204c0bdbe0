import type { Logger } from 'pino'
import { Resolver } from 'node:dns/promises'
import { Readable } from 'node:stream'
import { authenticate } from 'mailauth'
import { cachedResolve } from './dns-cache.js'
import type { MessageIntake, StoreChecked } from './intake.js'
import type { AuthVerdict } from '../../storage/store.js'

/** A DNS lookup as mailauth asks for it: `dns.promises.resolve`'s signature. */
export type DnsResolve = (name: string, rrtype: string) => Promise<unknown>

/** How long all the lookups of one message may take together; past it the message is answered 451 and tried again later. */
export const VERIFY_TIMEOUT_MS = 30_000

/** SPF, DKIM, DMARC and ARC lookups through MAILROOM_DNS_SERVERS, or the system's servers, their answers kept a minute (DNS_CACHE). */
export function authResolver(servers: string[] | null): DnsResolve {
  const resolver = new Resolver({ timeout: 5000, tries: 2 })
  if (servers) resolver.setServers(servers)
  return cachedResolve((name, rrtype) => resolver.resolve(name, rrtype as 'TXT'))
}

export interface VerifyInput {
  /** The message, whole or in the pieces it arrived in (read in order, never joined). */
  raw: Buffer | Buffer[]
  /** The envelope sender, '' for the null sender. */
  mailFrom: string
  /** The connecting client's address. */
  remoteAddress: string
  /** What the client said in EHLO or HELO. */
  heloName: string
  resolver: DnsResolve
  /** This MX's name: the authserv-id of the Authentication-Results header (RFC 8601 §2.5). */
  hostname: string
  timeoutMs?: number
}

/**
 * Checks a received message as its sender's domains ask: SPF for the connecting address and the
 * envelope sender (RFC 7208), each DKIM signature (RFC 6376), DMARC for the From domain (RFC
 * 7489 and its successor), and the ARC chain (RFC 8617), with mailauth. Throws when the lookups
 * took longer than VERIFY_TIMEOUT_MS (a temporary failure: the sender tries again).
 */
export async function verifyInbound(input: VerifyInput): Promise<AuthVerdict> {
  const timeoutMs = input.timeoutMs ?? VERIFY_TIMEOUT_MS
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`authentication checks took longer than ${timeoutMs} ms`)), timeoutMs)
  })
  try {
    const result = await Promise.race([
      authenticate(asInput(input.raw), {
        sender: input.mailFrom,
        ip: input.remoteAddress.replace(/^::ffff:/, ''),
        helo: input.heloName,
        mta: input.hostname,
        resolver: input.resolver as never,
        // BIMI is a logo for mail clients, not a verdict: not looked up.
        disableBimi: true,
        // The Received headers are the sender's to write: the connection's own facts are used.
        trustReceived: false,
      }),
      deadline,
    ])
    return verdictOf(result)
  } finally {
    clearTimeout(timer)
  }
}

/** One piece as it is; more as a stream of them, so that they are not joined. */
const asInput = (raw: Buffer | Buffer[]) =>
  !Array.isArray(raw) ? raw : raw.length === 1 ? raw[0] : Readable.from(raw, { objectMode: false })

type Authenticated = Awaited<ReturnType<typeof authenticate>>

/** mailauth's answer as the verdict kept with the message. */
function verdictOf(result: Authenticated): AuthVerdict {
  const { spf, dkim, dmarc, arc } = result
  return {
    spf: { result: word(spf ? spf.status.result : 'none'), domain: spf ? spf.domain || null : null },
    // mailauth reports a message without signatures as one `none` result of no domain: here, none at all.
    dkim: (dkim.results ?? [])
      .filter((r) => r.signingDomain || r.status.result !== 'none')
      .map((r) => ({
        result: word(r.status.result),
        domain: r.signingDomain ?? null,
        selector: r.selector ?? null,
      })),
    dmarc: dmarc
      ? {
          result: word(dmarc.status.result),
          policy: dmarc.policy ?? null,
          domain: dmarc.status.header?.from ?? dmarc.domain ?? null,
        }
      : { result: 'none', policy: null, domain: null },
    arc: { result: word(arc ? arc.status.result : 'none') },
    header: authResultsValue(result.headers),
  }
}

/** mailauth's `temperr` is RFC 8601's `temperror`. */
const word = (result: string) => (result === 'temperr' ? 'temperror' : result)

/** The value of the Authentication-Results header among the headers mailauth made (Received-SPF is the other). */
function authResultsValue(headers: string): string {
  const at = headers.search(/^Authentication-Results:/im)
  if (at < 0) throw new Error('mailauth made no Authentication-Results header')
  const rest = headers.slice(at + 'Authentication-Results:'.length)
  // The header runs to the first line end not followed by folding white space.
  const end = rest.search(/\r?\n(?![ \t])/)
  return (end < 0 ? rest : rest.slice(0, end)).trim()
}

/** Whether the From domain's DMARC policy asks that this message be refused: DMARC failed under p=reject (RFC 7489 §6.3). */
export function dmarcRejects(verdict: AuthVerdict): boolean {
  return verdict.dmarc.result === 'fail' && verdict.dmarc.policy === 'reject'
}

export interface CheckDeps {
  /** SPF, DKIM and DMARC lookups (authResolver). */
  resolver: DnsResolve
  /** This MX's public name: the authserv-id of Authentication-Results. */
  hostname: string
  logger: Logger
}

/**
 * The intake: the message is checked (SPF, DKIM, DMARC, ARC) here, refused when its From domain's
 * DMARC policy says reject, and otherwise handed to `store` (storeChecked, here or in another
 * thread).
 */
export function inboundIntake(deps: CheckDeps, store: StoreChecked): MessageIntake {
  const { resolver, hostname, logger } = deps
  return async (message) => {
    const { raw, mailFrom, remoteAddress, heloName } = message
    let auth: AuthVerdict
    try {
      auth = await verifyInbound({ raw, mailFrom, remoteAddress, heloName, resolver, hostname })
    } catch (err) {
      logger.warn({ err, ip: remoteAddress }, 'MX authentication checks failed')
      return {
        code: 451,
        text: "4.4.3 The sender's domain could not be checked now; try again later",
        reason: 'checks_failed',
      }
    }
    if (dmarcRejects(auth)) {
      logger.info({ ip: remoteAddress, from: auth.dmarc.domain }, 'MX message refused: DMARC policy reject')
      return { code: 550, text: `5.7.1 ${dmarcReason(auth)}`, reason: 'dmarc_reject' }
    }
    return store({ ...message, auth })
  }
}

/** Why DMARC refuses the message, as the sender's postmaster reads it in the bounce. */
function dmarcReason(auth: AuthVerdict): string {
  const dkim = auth.dkim.length ? auth.dkim.map((d) => `${d.result} (${d.domain})`).join(', ') : 'none'
  return `Message refused: the DMARC policy of ${auth.dmarc.domain} is reject, and it failed DMARC (SPF ${auth.spf.result} for ${auth.spf.domain ?? 'no domain'}, DKIM ${dkim})`
}
