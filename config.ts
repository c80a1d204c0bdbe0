import { hostname } from 'node:os'
import { resolve } from 'node:path'
import { z } from 'zod'

/** Sizes like `25mb`, `512kb` or plain bytes. */
const Size = z
  .string()
  .regex(/^\d+(\.\d+)?\s*(b|kb|mb|gb)?$/i, 'expected a size such as 25mb, 512kb or 1048576')
  .transform((s) => {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(s)!
    const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase() as 'b']
    return Math.floor(Number(m[1]) * unit)
  })

const Port = z.coerce.number().int().min(0).max(65535)
const Money = z.coerce.number().min(0).max(1_000_000)

/**
 * Every setting mailroom reads from the environment. This is the only place that reads
 * process.env; everything else receives a Config.
 */
export const ConfigSchema = z.object({
  /** Where the SQLite database, the server secret and generated certificates live. */
  MAILROOM_DATA_DIR: z.string().min(1).default('./data'),
  /** Address the HTTP server (REST, MCP, documents) binds to. Loopback by default: nothing is exposed by surprise. */
  MAILROOM_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  /** HTTP port. */
  MAILROOM_HTTP_PORT: Port.default(8080),
  /** The base address clients use to reach this server, used in documents and printed examples. */
  MAILROOM_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Largest accepted HTTP request body (JSON with base64 attachments is a third larger than the mail). */
  MAILROOM_HTTP_BODY_LIMIT: Size.prefault('40mb'),
  /** Largest accepted message, whatever the door. */
  MAILROOM_MAX_MESSAGE_SIZE: Size.prefault('25mb'),
  /** Most recipients one message may have. */
  MAILROOM_MAX_RECIPIENTS: z.coerce.number().int().min(1).max(10000).default(100),
  /** Currency of new accounts (ISO 4217). */
  MAILROOM_CURRENCY: z.string().regex(/^[A-Z]{3}$/, 'expected an ISO 4217 code such as USD').default('USD'),
  /** Base price per billing cycle of new accounts. */
  MAILROOM_PRICE_BASE: Money.default(1.0),
  /** Price per accepted message of new accounts. */
  MAILROOM_PRICE_PER_MESSAGE: Money.default(0.0002),
  /** pino log level. */
  MAILROOM_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** This node's name, recorded as `assigned` on the log rows it delivers and used in Message-IDs. */
  MAILROOM_NODE_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, 'expected a host name')
    .default(() => hostname().replace(/[^A-Za-z0-9.-]/g, '-') || 'mailroom'),
  /** The API key `mailroom stdio` acts with. */
  MAILROOM_API_KEY: z.string().min(1).optional(),
})

export type Env = z.output<typeof ConfigSchema>

export interface Config {
  dataDir: string
  http: { host: string; port: number; bodyLimit: number }
  publicUrl: string
  maxMessageSize: number
  maxRecipients: number
  pricing: { currency: string; base: number; perMessage: number }
  logLevel: Env['MAILROOM_LOG_LEVEL']
  nodeName: string
  apiKey?: string
}

export class ConfigError extends Error {}

/** Reads and checks the environment once; a bad value throws a ConfigError that names the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked = Object.fromEntries(
    Object.keys(ConfigSchema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]),
  )
  const parsed = ConfigSchema.safeParse(picked)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}=${JSON.stringify(picked[String(i.path[0])])}: ${i.message}`)
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`)
  }
  const e = parsed.data
  return {
    dataDir: resolve(e.MAILROOM_DATA_DIR),
    http: { host: e.MAILROOM_HTTP_HOST, port: e.MAILROOM_HTTP_PORT, bodyLimit: e.MAILROOM_HTTP_BODY_LIMIT },
    publicUrl: (e.MAILROOM_PUBLIC_URL ?? `http://localhost:${e.MAILROOM_HTTP_PORT}`).replace(/\/+$/, ''),
    maxMessageSize: e.MAILROOM_MAX_MESSAGE_SIZE,
    maxRecipients: e.MAILROOM_MAX_RECIPIENTS,
    pricing: { currency: e.MAILROOM_CURRENCY, base: e.MAILROOM_PRICE_BASE, perMessage: e.MAILROOM_PRICE_PER_MESSAGE },
    logLevel: e.MAILROOM_LOG_LEVEL,
    nodeName: e.MAILROOM_NODE_NAME,
    apiKey: e.MAILROOM_API_KEY,
  }
}
