/**
 * The one error type of mailroom. A tool, the relay or the store throws it with an HTTP-style
 * code; each door renders it in its own way: an HTTP status with `{code, message}`, an MCP tool
 * result with `isError: true`, or an SMTP reply.
 */
export class MailroomError extends Error {
  readonly code: number
  /** The SMTP reply for this refusal, when it happens inside an SMTP session (e.g. `550 5.7.1`). */
  readonly smtp?: { code: number; enhanced: string }
  /** Extra response headers (e.g. Retry-After for 429). */
  readonly headers?: Record<string, string>

  constructor(
    code: number,
    message: string,
    options: { smtp?: { code: number; enhanced: string }; headers?: Record<string, string> } = {},
  ) {
    super(message)
    this.name = 'MailroomError'
    this.code = code
    this.smtp = options.smtp
    this.headers = options.headers
  }

  toJSON(): ErrorBody {
    return { code: this.code, message: this.message }
  }
}

export interface ErrorBody {
  code: number
  message: string
}

/** Status codes we answer with, and the SMTP reply each maps to when no specific one was given. */
export const ERROR_CODES = {
  400: { name: 'invalid input', smtp: { code: 550, enhanced: '5.5.2' } },
  401: { name: 'API key is missing or invalid', smtp: { code: 535, enhanced: '5.7.8' } },
  403: { name: 'forbidden', smtp: { code: 550, enhanced: '5.7.1' } },
  404: { name: 'not found', smtp: { code: 550, enhanced: '5.1.0' } },
  413: { name: 'request body too large', smtp: { code: 552, enhanced: '5.3.4' } },
  415: { name: 'unsupported content type', smtp: { code: 554, enhanced: '5.6.0' } },
  429: { name: 'rate limited', smtp: { code: 421, enhanced: '4.7.0' } },
  500: { name: 'internal error', smtp: { code: 451, enhanced: '4.3.0' } },
  // RFC 3463 §3.4: X.3.1 "mail system full", a transient failure.
  503: { name: 'try again later', smtp: { code: 451, enhanced: '4.3.1' } },
} as const

export type ErrorCode = keyof typeof ERROR_CODES

export const badInput = (message: string, smtp?: MailroomError['smtp']) => new MailroomError(400, message, { smtp })
export const notFound = (message: string) => new MailroomError(404, message)
/** A missing or wrong API key: the contract's message, and `hint` for a client that has no documents to tell it more. */
export const unauthorized = (hint?: string) =>
  new MailroomError(401, hint ? `${ERROR_CODES[401].name}: ${hint}` : ERROR_CODES[401].name)

/**
 * The codes a store fails with when its disk is full: SQLite's SQLITE_FULL, the system's ENOSPC,
 * PostgreSQL's disk_full (53100).
 */
const DISK_FULL = new Set(['SQLITE_FULL', 'ENOSPC', '53100'])
/** How long a client is told to wait when the disk is full: long enough for an operator to free some. */
export const DISK_FULL_RETRY_AFTER_S = 60

/**
 * Any thrown value as a MailroomError: a full disk is a 503 with Retry-After (every door answers
 * "try later": nothing was accepted, and the client should not give up); other unknown errors
 * become a 500 `internal error`.
 */
export function asMailroomError(err: unknown): MailroomError {
  if (err instanceof MailroomError) return err
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && DISK_FULL.has(code))
    return new MailroomError(
      503,
      `the server cannot store the message now: its disk is full; try again in ${DISK_FULL_RETRY_AFTER_S} s`,
      { headers: { 'Retry-After': String(DISK_FULL_RETRY_AFTER_S) } },
    )
  return new MailroomError(500, ERROR_CODES[500].name)
}

/** The SMTP reply line for an error, e.g. `550 5.7.1 sender blocked`. */
export function smtpReply(err: MailroomError): { code: number; message: string } {
  const known = ERROR_CODES[err.code as ErrorCode]
  const smtp = err.smtp ?? known?.smtp ?? ERROR_CODES[500].smtp
  return { code: smtp.code, message: `${smtp.enhanced} ${err.message}` }
}
