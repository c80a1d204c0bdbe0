import { isIP, isIPv4, isIPv6 } from 'node:net'
import { hostname } from 'node:os'
import { resolve } from 'node:path'
import { z } from 'zod'
import { didYouMean } from './did-you-mean.js'

/** Sizes like `25mb`, `512kb` or plain bytes; at least 1kb (a smaller limit would refuse every message). */
const Size = z
  .string()
  .regex(/^\d+(\.\d+)?\s*(b|kb|mb|gb)?$/i, 'expected a size such as 25mb, 512kb or 1048576')
  .transform((s) => {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(s)!
    const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase() as 'b']
    return Math.floor(Number(m[1]) * unit)
  })
  .refine((n) => n >= 1024, 'expected at least 1kb')

/** A port number of `min` or more: digits only (a blank read as a number would be 0, any free port). */
const PortFrom = (min: number) =>
  z.string().regex(/^\d+$/, 'expected a port number').transform(Number).pipe(z.number().int().min(min).max(65535))
const Port = PortFrom(0)

const DURATION_UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
/** Durations like `500ms`, `30s`, `5m`, `2h`, `1d`, in milliseconds. */
const Duration = z
  .string()
  .regex(/^\d+(ms|s|m|h|d)$/, 'expected a duration such as 30s, 5m, 2h or 1d')
  .transform((s) => {
    const m = /^(\d+)(ms|s|m|h|d)$/.exec(s)!
    return Number(m[1]) * DURATION_UNITS[m[2] as keyof typeof DURATION_UNITS]
  })
/** A Duration of at least `min` ms, `text` naming it in the message. */
const DurationAtLeast = (min: number, text: string) => Duration.refine((ms) => ms >= min, `expected at least ${text}`)
/** The longest wait a Node.js timer keeps: a longer one overflows and fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1
const DurationList = z
  .string()
  .regex(/^\d+(ms|s|m|h|d)(,\s*\d+(ms|s|m|h|d))*$/, 'expected durations separated by commas, such as 5m,10m,1h')
  .transform((s) => s.split(',').map((d) => Duration.parse(d.trim())))
  .refine((list) => list.every((ms) => ms >= 1000), 'expected waits of at least 1s each')
/** A DNS server: an IP address, `ipv4:port` or `[ipv6]:port`. */
const isDnsServer = (s: string) => {
  const bracketed = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s)
  if (bracketed) return isIPv6(bracketed[1]) && Number(bracketed[2]) <= 65535
  const withPort = /^([\d.]+):(\d{1,5})$/.exec(s)
  if (withPort) return isIPv4(withPort[1]) && Number(withPort[2]) <= 65535
  return isIP(s) !== 0
}
/** `host:port` */
const HostPort = z
  .string()
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'expected host:port')
  .transform((s) => {
    const i = s.lastIndexOf(':')
    return { host: s.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(s.slice(i + 1)) }
  })
  .refine(({ port }) => port >= 1 && port <= 65535, 'expected a port from 1 to 65535')
const Money = z.coerce.number().min(0).max(1_000_000)
/** An IP address, a CIDR range (`10.0.0.0/8`, `2001:db8::/32`) or `loopback`. */
const isProxyEntry = (s: string) => {
  if (s === 'loopback') return true
  const [address, bits, ...rest] = s.split('/')
  if (bits === undefined) return isIP(address) !== 0
  return (
    rest.length === 0 && /^\d{1,3}$/.test(bits) && isIP(address) !== 0 && Number(bits) <= (isIPv4(address) ? 32 : 128)
  )
}

/**
 * Every setting mailroom reads from the environment. This is the only place that reads
 * process.env; everything else receives a Config.
 */
export const ConfigSchema = z.object({
  /** Where the SQLite database, the server secret and generated certificates live. */
  MAILROOM_DATA_DIR: z.string().min(1).default('./data'),
  /** `postgres://user:password@host:port/database`: the shared database of several nodes, instead of SQLite in MAILROOM_DATA_DIR. */
  MAILROOM_DATABASE_URL: z
    .string()
    .refine((s) => {
      try {
        const url = new URL(s)
        return ['postgres:', 'postgresql:'].includes(url.protocol) && url.hostname !== ''
      } catch {
        return false
      }
    }, 'expected postgres://user:password@host:port/database')
    .optional(),
  /** Address the HTTP server (REST, MCP, documents) binds to. Loopback by default: nothing is exposed by surprise. */
  MAILROOM_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  /** HTTP port. */
  MAILROOM_HTTP_PORT: Port.default(8080),
  /** The base address clients use to reach this server, used in documents and printed examples. */
  MAILROOM_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Largest accepted HTTP request body (JSON with base64 attachments is a third larger than the mail). */
  MAILROOM_HTTP_BODY_LIMIT: Size.prefault('40mb'),
  /**
   * Most message bytes all doors (REST, MCP, SMTP) hold in memory at once; past it a send is
   * answered "try later" (HTTP 503 with Retry-After, SMTP 451 4.3.1) before its body is read.
   */
  MAILROOM_MEMORY_BUDGET: Size.prefault('256mb'),
  /** The same, for one account: one busy account cannot take the whole budget from the others. */
  MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: Size.prefault('128mb'),
  /** Wrong API keys allowed per client address in 15 minutes before its requests needing a key are answered 429. */
  MAILROOM_HTTP_MAX_AUTH_FAILURES: z.coerce.number().int().min(1).max(100_000).default(30),
  /** The reverse proxies in front of HTTP, whose X-Forwarded-For is believed: addresses, CIDR ranges or `loopback`, separated by commas. */
  MAILROOM_TRUST_PROXY: z
    .string()
    .transform((s) => s.split(',').map((entry) => entry.trim()))
    .refine(
      (list) => list.every(isProxyEntry),
      'expected IP addresses, CIDR ranges (10.0.0.0/8) or loopback, separated by commas',
    )
    .optional(),
  /** Largest accepted message, whatever the door. */
  MAILROOM_MAX_MESSAGE_SIZE: Size.prefault('25mb'),
  /** Most recipients one message may have. */
  MAILROOM_MAX_RECIPIENTS: z.coerce.number().int().min(1).max(10000).default(100),
  /** Currency of new accounts (ISO 4217). */
  MAILROOM_CURRENCY: z
    .string()
    .regex(/^[A-Z]{3}$/, 'expected an ISO 4217 code such as USD')
    .default('USD'),
  /** Base price per billing cycle of new accounts; 1.00 when unset. */
  MAILROOM_PRICE_BASE: Money.optional(),
  /** Price per accepted message of new accounts; 0.0002 when unset. */
  MAILROOM_PRICE_PER_MESSAGE: Money.optional(),
  /** pino log level. */
  MAILROOM_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** This node's name, recorded as `assigned` on the log rows it delivers and used in Message-IDs. */
  MAILROOM_NODE_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, 'expected a host name')
    .default(() => hostname().replace(/[^A-Za-z0-9.-]/g, '-') || 'mailroom'),
  /** Address the SMTP submission server binds to. */
  MAILROOM_SMTP_HOST: z.string().min(1).default('127.0.0.1'),
  /** SMTP submission port (25 in production). */
  MAILROOM_SMTP_PORT: Port.default(2525),
  /** SMTP submission over implicit TLS (465 in production, RFC 8314 §3.3), on MAILROOM_SMTP_HOST; `off` for none. */
  MAILROOM_SMTPS_PORT: z.union([z.literal('off'), Port]).default(2465),
  /** PEM certificate and key for STARTTLS; without them one is generated into the data directory. */
  MAILROOM_TLS_CERT: z.string().min(1).optional(),
  MAILROOM_TLS_KEY: z.string().min(1).optional(),
  /** Refuse AUTH before STARTTLS, so that passwords never cross the network in clear. */
  MAILROOM_SMTP_AUTH_REQUIRES_TLS: z.enum(['true', 'false']).default('true'),
  /** Failed AUTH attempts allowed per client address in 15 minutes before AUTH is refused. */
  MAILROOM_SMTP_MAX_AUTH_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
  /** Most SMTP connections open at once; one more is answered 421 and closed. */
  MAILROOM_SMTP_MAX_CLIENTS: z.coerce.number().int().min(1).max(100_000).default(1000),
  /** Most SMTP connections open at once from one client address (an IPv6 client's /64); one more is answered 421 and closed. */
  MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS: z.coerce.number().int().min(1).max(100_000).default(50),
  /** A connection not authenticated this long after it opened is answered 421 and closed (authenticated ones idle out after 60s). */
  MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT: DurationAtLeast(1000, '1s')
    .refine((ms) => ms <= 3_600_000, 'expected at most 1h')
    .prefault('30s'),
  /** How long one read of the log or the statistics may take; then it is answered 503 and stopped. */
  MAILROOM_LOG_READ_TIMEOUT: DurationAtLeast(1000, '1s')
    .refine((ms) => ms <= 600_000, 'expected at most 10m')
    .prefault('10s'),
  /** How long a message's DATA may take from the 354 to its final dot; then 421 and the connection is closed. */
  MAILROOM_SMTP_DATA_TIMEOUT: DurationAtLeast(1000, '1s')
    .refine((ms) => ms <= 3_600_000, 'expected at most 1h')
    .prefault('10m'),
  /** Address the MX door (mail from the internet for the receiving domains) binds to. */
  MAILROOM_MX_LISTEN_HOST: z.string().min(1).default('127.0.0.1'),
  /** The MX door's port (25 in production), on MAILROOM_MX_LISTEN_HOST; `off` (the default) for none. */
  MAILROOM_MX_LISTEN_PORT: z.union([z.literal('off'), Port]).default('off'),
  /** `host:port`: when set, every message goes there instead of to the recipients' MX hosts. */
  MAILROOM_SMARTHOST: HostPort.optional(),
  /** `ip:port,…`: the DNS servers for MX lookups and the MX door's SPF, DKIM and DMARC checks; default the system's. */
  MAILROOM_DNS_SERVERS: z
    .string()
    .regex(/^[^,\s]+(,[^,\s]+)*$/, 'expected ip:port entries separated by commas')
    .transform((s) => s.split(','))
    .refine(
      (list) => list.every(isDnsServer),
      'expected IP addresses, each with an optional port (192.0.2.53:53, [2001:db8::53]:53)',
    )
    .optional(),
  /** Port used to reach an MX host. */
  MAILROOM_MX_PORT: PortFrom(1).default(25),
  /** Deliver to MX hosts at loopback, private and other non-public addresses (a lab, an internal mail network); the smarthost always is. */
  MAILROOM_ALLOW_PRIVATE_MX: z.enum(['true', 'false']).default('false'),
  /** Most SMTP transactions in flight toward destinations, in all (not counting those whose message is out and that only wait for its reply). */
  MAILROOM_DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(20),
  /** Most SMTP transactions in flight toward one destination domain. */
  MAILROOM_DOMAIN_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  /** Waits between delivery attempts after a temporary failure; the last one repeats. */
  MAILROOM_RETRY_SCHEDULE: DurationList.prefault('5m,10m,20m,40m,1h,2h,4h'),
  /** A message still undelivered this long after it was accepted fails. */
  MAILROOM_MAX_QUEUE_AGE: DurationAtLeast(60_000, '1m').prefault('48h'),
  /** Whether a sender gets a report (RFC 3464) when a recipient fails, or is still deferred past MAILROOM_DELAY_WARNING. */
  MAILROOM_BOUNCE_REPORTS: z.enum(['on', 'off']).default('on'),
  /** A recipient still deferred this long after acceptance gets its sender one `delayed` report; `off` for none. */
  MAILROOM_DELAY_WARNING: z.union([z.literal('off'), DurationAtLeast(60_000, '1m')]).prefault('4h'),
  /** Connection, greeting and inactivity timeout toward a destination (a timer's wait, so at most MAX_TIMER_MS). */
  MAILROOM_DELIVERY_TIMEOUT: DurationAtLeast(1000, '1s')
    .refine(
      (ms) => ms <= MAX_TIMER_MS,
      `expected at most ${MAX_TIMER_MS}ms (about 24.8 days), the longest timer Node.js keeps`,
    )
    .prefault('60s'),
  /** A delivery leased by a node that has not renewed it this long is taken over by another (its node is taken for dead). */
  MAILROOM_LEASE_TIMEOUT: DurationAtLeast(5000, '5s')
    .refine((ms) => ms <= MAX_TIMER_MS, `expected at most ${MAX_TIMER_MS}ms`)
    .prefault('10m'),
  /** Spam-filter events older than this are deleted (the block lists look back 5 days at most, so no less). */
  MAILROOM_BLOCK_EVENT_RETENTION: DurationAtLeast(5 * 86_400_000, '5d').prefault('30d'),
  /** Received messages older than this are deleted, with their bytes (at start, then hourly). */
  MAILROOM_INBOUND_RETENTION: DurationAtLeast(3_600_000, '1h').prefault('30d'),
  /** A message held for a person's approval and not decided within this is rejected (docs/approval.md). */
  MAILROOM_APPROVAL_TTL: DurationAtLeast(60_000, '1m')
    .refine((ms) => ms <= MAX_TIMER_MS, `expected at most ${MAX_TIMER_MS}ms`)
    .prefault('24h'),
  /** The bytes one inbox may hold: past them its mail is refused at RCPT with 452 4.2.2. */
  MAILROOM_INBOX_QUOTA: Size.prefault('1gb'),
  /** The public name of this MX host, which `mailroom domain receive` tells to publish as a domain's MX record. */
  MAILROOM_MX_HOSTNAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, 'expected a host name')
    .default(() => hostname().replace(/[^A-Za-z0-9.-]/g, '-') || 'localhost'),
  /**
   * The label of each receiving domain's return path (`bounces`: mail from acme.example bounces to
   * `b…@bounces.acme.example`, read by the MX door); `off`: mail keeps its sender as its return path.
   */
  MAILROOM_RETURN_PATH: z
    .string()
    .regex(/^(?:off|[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)$/i, 'expected off or a DNS label, as bounces')
    .transform((v) => v.toLowerCase())
    .default('off'),
  /** A PEM file of CAs trusted beside the system's for outbound TLS: MX certificates under MTA-STS, and MTA-STS policy hosts. */
  MAILROOM_OUTBOUND_CA: z.string().min(1).optional(),
  /** `mb<id>`: the mail order daily TLS reports (RFC 8460) are queued under; unset, none is sent and nothing counted. */
  MAILROOM_TLS_REPORTS_ORDER: z
    .string()
    .regex(/^mb\d+$/, 'expected a mail order username such as mb1')
    .transform((s) => Number(s.slice(2)))
    .optional(),
  /** The address TLS reports come from, and their contact-info; its domain is the organization-name. */
  MAILROOM_TLS_REPORTS_FROM: z.email().optional(),
  /** Post webhooks to endpoints at loopback, private and other non-public addresses (tests, a lab); checked at each send. */
  MAILROOM_ALLOW_PRIVATE_WEBHOOKS: z.enum(['true', 'false']).default('false'),
  /** Waits between the attempts to post a webhook event that failed; after the last one it is dropped. */
  MAILROOM_WEBHOOK_RETRY_SCHEDULE: DurationList.prefault('5s,5m,30m,2h,5h,10h'),
  /** How long an OAuth access token is good for (the MCP authorization's bearer tokens); a client refreshes it after. */
  MAILROOM_OAUTH_ACCESS_TOKEN_TTL: DurationAtLeast(60_000, '1m')
    .refine((ms) => ms <= 86_400_000, 'expected at most 1d')
    .prefault('1h'),
  /** How long an OAuth refresh token is good for; each refresh gives a new one for as long again. */
  MAILROOM_OAUTH_REFRESH_TOKEN_TTL: DurationAtLeast(3_600_000, '1h').prefault('30d'),
  /** OAuth clients one client address may register (RFC 7591) in an hour. */
  MAILROOM_OAUTH_REGISTRATIONS_PER_ADDRESS: z.coerce.number().int().min(1).max(100_000).default(20),
  /** Most OAuth clients registered at once; a client left without a grant for a day is removed. */
  MAILROOM_OAUTH_MAX_CLIENTS: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
  /** Fetch OAuth Client ID Metadata Documents over http and from loopback, private and other non-public addresses (tests, a lab). */
  MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA: z.enum(['true', 'false']).default('false'),
  /** The API key `mailroom stdio` acts with. */
  MAILROOM_API_KEY: z.string().min(1).optional(),
  /** The server secret (base64 of 32 bytes) that encrypts order passwords and DKIM keys, instead of the data directory's secret.key. */
  MAILROOM_SECRET_KEY: z
    .string()
    .refine(
      (s) => /^[A-Za-z0-9+/]{43}=$/.test(s) && Buffer.from(s, 'base64').length === 32,
      `expected base64 of exactly 32 bytes; make one with \`openssl rand -base64 32\` or \`node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"\``,
    )
    .transform((s) => Buffer.from(s, 'base64'))
    .optional(),
  /** The bearer token `GET /metrics` asks for; without it, metrics are served to loopback clients only. */
  MAILROOM_METRICS_TOKEN: z
    .string()
    .regex(/^[A-Za-z0-9._~+/-]+=*$/, 'expected letters, digits and - . _ ~ + / only')
    .min(16, 'expected at least 16 characters; make one with `openssl rand -hex 32`')
    .optional(),
})

/**
 * Read by the tests rather than by mailroom (where the PostgreSQL suites find a server, the
 * browser tests a browser), and known all the same: a test run's environment starts mailroom.
 */
const TEST_SETTINGS = ['MAILROOM_TEST_DATABASE_URL', 'MAILROOM_TEST_CHROMIUM']

/** Every MAILROOM_ variable there is: any other in the environment is taken for a misspelling, and stops the start. */
export const KNOWN_SETTINGS: readonly string[] = [...Object.keys(ConfigSchema.shape), ...TEST_SETTINGS]

/** The settings as the code reads them, grouped, built from the checked environment. */
const Settings = ConfigSchema.transform((e) => ({
  dataDir: resolve(e.MAILROOM_DATA_DIR),
  /** The server database of several nodes, or null for SQLite in the data directory. */
  databaseUrl: e.MAILROOM_DATABASE_URL ?? null,
  http: {
    host: e.MAILROOM_HTTP_HOST,
    port: e.MAILROOM_HTTP_PORT,
    bodyLimit: e.MAILROOM_HTTP_BODY_LIMIT,
    maxAuthFailures: e.MAILROOM_HTTP_MAX_AUTH_FAILURES,
  },
  /** Message bytes held in memory at once (relay/byte-budget.ts). */
  memoryBudget: { total: e.MAILROOM_MEMORY_BUDGET, perAccount: e.MAILROOM_MEMORY_BUDGET_PER_ACCOUNT },
  trustProxy: e.MAILROOM_TRUST_PROXY ?? [],
  publicUrl: (e.MAILROOM_PUBLIC_URL ?? `http://localhost:${e.MAILROOM_HTTP_PORT}`).replace(/\/+$/, ''),
  maxMessageSize: e.MAILROOM_MAX_MESSAGE_SIZE,
  logReadTimeout: e.MAILROOM_LOG_READ_TIMEOUT,
  maxRecipients: e.MAILROOM_MAX_RECIPIENTS,
  pricing: {
    currency: e.MAILROOM_CURRENCY,
    base: e.MAILROOM_PRICE_BASE ?? 1.0,
    perMessage: e.MAILROOM_PRICE_PER_MESSAGE ?? 0.0002,
    /** Whether the operator set a price: the console shows a cost only then. */
    priced: e.MAILROOM_PRICE_BASE !== undefined || e.MAILROOM_PRICE_PER_MESSAGE !== undefined,
  },
  logLevel: e.MAILROOM_LOG_LEVEL,
  nodeName: e.MAILROOM_NODE_NAME,
  apiKey: e.MAILROOM_API_KEY,
  /** The server secret given in the environment, or null for the data directory's secret.key. */
  secretKey: e.MAILROOM_SECRET_KEY ?? null,
  /** The bearer token of GET /metrics, or null to serve it to loopback clients only. */
  metricsToken: e.MAILROOM_METRICS_TOKEN ?? null,
  blockEventRetention: e.MAILROOM_BLOCK_EVENT_RETENTION,
  /** Messages held for approval (docs/approval.md). */
  approval: { ttl: e.MAILROOM_APPROVAL_TTL },
  /** Received mail (docs/inbound.md). */
  inbound: {
    retention: e.MAILROOM_INBOUND_RETENTION,
    quota: e.MAILROOM_INBOX_QUOTA,
    mxHostname: e.MAILROOM_MX_HOSTNAME,
    /** The label of the receiving domains' return paths (`bounces`), or null when off. */
    returnPath: e.MAILROOM_RETURN_PATH === 'off' ? null : e.MAILROOM_RETURN_PATH,
  },
  smtp: {
    host: e.MAILROOM_SMTP_HOST,
    port: e.MAILROOM_SMTP_PORT,
    /** The implicit-TLS submission port, or null when off. */
    securePort: e.MAILROOM_SMTPS_PORT === 'off' ? null : e.MAILROOM_SMTPS_PORT,
    tls:
      e.MAILROOM_TLS_CERT && e.MAILROOM_TLS_KEY
        ? { cert: resolve(e.MAILROOM_TLS_CERT), key: resolve(e.MAILROOM_TLS_KEY) }
        : null,
    authRequiresTls: e.MAILROOM_SMTP_AUTH_REQUIRES_TLS === 'true',
    maxAuthFailures: e.MAILROOM_SMTP_MAX_AUTH_FAILURES,
    maxClients: e.MAILROOM_SMTP_MAX_CLIENTS,
    maxClientsPerAddress: e.MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS,
    unauthenticatedTimeout: e.MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT,
    dataTimeout: e.MAILROOM_SMTP_DATA_TIMEOUT,
  },
  /** The MX door (relay/inbound/mx.ts). */
  mx: {
    host: e.MAILROOM_MX_LISTEN_HOST,
    /** Its port, or null when off. */
    port: e.MAILROOM_MX_LISTEN_PORT === 'off' ? null : e.MAILROOM_MX_LISTEN_PORT,
  },
  delivery: {
    smarthost: e.MAILROOM_SMARTHOST ?? null,
    dnsServers: e.MAILROOM_DNS_SERVERS ?? null,
    mxPort: e.MAILROOM_MX_PORT,
    allowPrivateMx: e.MAILROOM_ALLOW_PRIVATE_MX === 'true',
    concurrency: e.MAILROOM_DELIVERY_CONCURRENCY,
    domainConcurrency: e.MAILROOM_DOMAIN_CONCURRENCY,
    retrySchedule: e.MAILROOM_RETRY_SCHEDULE,
    maxQueueAge: e.MAILROOM_MAX_QUEUE_AGE,
    timeout: e.MAILROOM_DELIVERY_TIMEOUT,
    leaseTimeout: e.MAILROOM_LEASE_TIMEOUT,
    /** A PEM file of CAs trusted beside the system's, or null. */
    outboundCa: e.MAILROOM_OUTBOUND_CA ? resolve(e.MAILROOM_OUTBOUND_CA) : null,
  },
  /** TLS reports to recipient domains (relay/tls-reports.ts): the order they are queued under, or null for none. */
  tlsReports: {
    orderId: e.MAILROOM_TLS_REPORTS_ORDER ?? null,
    from: e.MAILROOM_TLS_REPORTS_FROM ?? `tlsrpt-noreply@${e.MAILROOM_NODE_NAME}`,
  },
  webhooks: {
    allowPrivate: e.MAILROOM_ALLOW_PRIVATE_WEBHOOKS === 'true',
    retrySchedule: e.MAILROOM_WEBHOOK_RETRY_SCHEDULE,
  },
  oauth: {
    accessTokenTtl: e.MAILROOM_OAUTH_ACCESS_TOKEN_TTL,
    refreshTokenTtl: e.MAILROOM_OAUTH_REFRESH_TOKEN_TTL,
    registrationsPerAddress: e.MAILROOM_OAUTH_REGISTRATIONS_PER_ADDRESS,
    maxClients: e.MAILROOM_OAUTH_MAX_CLIENTS,
    allowPrivateClientMetadata: e.MAILROOM_ALLOW_PRIVATE_CLIENT_METADATA === 'true',
  },
  reports: {
    enabled: e.MAILROOM_BOUNCE_REPORTS === 'on',
    /** How long a recipient is deferred before its sender is told, or null for never. */
    delayWarning: e.MAILROOM_DELAY_WARNING === 'off' ? null : e.MAILROOM_DELAY_WARNING,
  },
}))

export type Config = z.output<typeof Settings>

export class ConfigError extends Error {}

/** Settings whose value is a secret: a refusal names them but never repeats the value. */
const SECRET_SETTINGS = new Set([
  'MAILROOM_SECRET_KEY',
  'MAILROOM_API_KEY',
  'MAILROOM_DATABASE_URL',
  'MAILROOM_METRICS_TOKEN',
])

/** Reads and checks the environment once; a bad value throws a ConfigError that names the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  refuseUnknownSettings(env)
  // A variable set to nothing (`MAILROOM_LOG_LEVEL=`, or blanks) is refused rather than read as unset: the
  // default it would silently get is not what whoever set it meant.
  const blank = Object.keys(ConfigSchema.shape).filter((k) => env[k]?.trim() === '')
  const picked = Object.fromEntries(
    Object.keys(ConfigSchema.shape).map((k) => [k, blank.includes(k) ? undefined : env[k]]),
  )
  const parsed = Settings.safeParse(picked)
  if (!parsed.success || blank.length) {
    const lines = [
      ...blank.map((k) => `${k}=${JSON.stringify(env[k])}: empty; give it a value, or unset it for the default`),
      ...(parsed.error?.issues ?? []).map(
        (i) =>
          `${i.path.join('.')}${SECRET_SETTINGS.has(String(i.path[0])) ? '' : `=${JSON.stringify(picked[String(i.path[0])])}`}: ${i.message}`,
      ),
    ]
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`)
  }
  if (!picked.MAILROOM_TLS_CERT !== !picked.MAILROOM_TLS_KEY)
    throw new ConfigError(
      'invalid configuration: MAILROOM_TLS_CERT and MAILROOM_TLS_KEY go together: set both or neither',
    )
  const { memoryBudget, http, maxMessageSize } = parsed.data
  // A message or body larger than what one account may hold could never be taken: it would be
  // told to try later for ever.
  const largest = Math.max(http.bodyLimit, maxMessageSize)
  if (memoryBudget.perAccount < largest || memoryBudget.total < memoryBudget.perAccount)
    throw new ConfigError(
      `invalid configuration: MAILROOM_MEMORY_BUDGET_PER_ACCOUNT (${memoryBudget.perAccount} bytes) must be at least MAILROOM_HTTP_BODY_LIMIT and MAILROOM_MAX_MESSAGE_SIZE (${largest} bytes), and MAILROOM_MEMORY_BUDGET (${memoryBudget.total} bytes) at least MAILROOM_MEMORY_BUDGET_PER_ACCOUNT`,
    )
  return parsed.data
}

/**
 * A MAILROOM_ variable that is no setting is refused, naming the one it was likely meant to be:
 * ignored, a misspelt MAILROOM_SMARTHOST would send real mail, and a misspelt port would quietly
 * fall back to its default. The value is not repeated: it may be a secret.
 */
function refuseUnknownSettings(env: Record<string, string | undefined>): void {
  const unknown = Object.keys(env).filter((k) => k.startsWith('MAILROOM_') && !KNOWN_SETTINGS.includes(k))
  if (unknown.length === 0) return
  const lines = unknown.map((k) => {
    const like = didYouMean(k, KNOWN_SETTINGS)
    return `${k}: no such setting${like ? ` (did you mean ${like}?)` : ''}`
  })
  throw new ConfigError(`invalid configuration: ${lines.join('; ')}; every setting is listed in docs/configuration.md`)
}
