import type { SecureContext } from 'node:tls'
import type { AppliedPolicy } from './mta-sts.js'
import type { CertificateCheck, TlsResultType } from './mx-certificate.js'
import type { MxHost } from './routes.js'
import { sameReply, SmtpNetworkError, SmtpRefusal, SmtpSession, type Reply } from './smtp-session.js'

export interface Attempt {
  /** The MX host the transaction ran on, or null when none could be reached. */
  mxHostname: string | null
  /** The address it connected to, and whether the connection was encrypted: null when none was made. */
  mxAddress: string | null
  tls: boolean | null
  /** Whether the MX certificate was valid for its name; null without TLS (or when not known). */
  certValid?: boolean | null
  /** The connections opened under an MTA-STS policy, and how each went: what a TLS report counts (RFC 8460). */
  sessions?: TlsSession[]
  replies: Map<string, Reply>
}

/** One connection made under an MTA-STS policy, as a TLS report counts it. */
export interface TlsSession {
  mxHost: string
  resultType: 'success' | TlsResultType
}

/** A connection without TLS, as a policy judges it. */
const NO_STARTTLS: CertificateCheck = {
  valid: false,
  resultType: 'starttls-not-supported',
  detail: 'did not offer STARTTLS',
}

/** How long an open connection waits for the next transaction to the same host. */
const IDLE_MS = 5_000

/** A failure as the reply it stands for: the server's, or none (code null) when none came. */
const replyOf = (err: unknown): Reply =>
  err instanceof SmtpRefusal ? err.reply : { code: null, response: err instanceof Error ? err.message : String(err) }

/**
 * Outbound SMTP toward destination MX hosts (`SmtpSession`: opportunistic STARTTLS, PIPELINING),
 * with connections kept open a few seconds for the next transaction to the same host.
 */
export class MxClient {
  private idle = new Map<string, { conn: SmtpSession; timer: NodeJS.Timeout; onEnd: () => void }[]>()

  constructor(private readonly options: { heloName: string; timeout: number; secureContext?: SecureContext }) {}

  /**
   * Delivers one message to a set of recipients at one domain, trying the hosts in order until
   * one answers. Every recipient gets a reply: the destination's, or a transient one when no
   * host could be reached or the connection broke. `sent` is called when the message is out and
   * the connection is free for another transaction, before the reply (see SmtpSession.send).
   * Under an MTA-STS policy in `enforce` mode (RFC 8461 §4.2), a host is used only over TLS with
   * a certificate valid for its name: else the message is not sent there, and when no host
   * qualifies every recipient gets a transient refusal that says why.
   */
  async deliver(
    hosts: MxHost[],
    envelope: { from: string; to: string[] },
    load: () => Promise<Buffer | undefined>,
    sent?: () => void,
    policy: AppliedPolicy | null = null,
  ): Promise<Attempt> {
    // The bytes are read once, and only once a host answered: a destination that is down costs no memory.
    let body: Promise<Buffer | undefined> | undefined
    const sessions: TlsSession[] = []
    const refusals: string[] = []
    let refused: Omit<Attempt, 'replies'> | null = null
    /** Whether the connection may carry the message under the policy; a refusal is noted. */
    const passes = (conn: SmtpSession, host: MxHost, address: string, fresh: boolean): boolean => {
      if (!policy || policy.mode === 'none') return true
      const check = conn.tls ? (conn.certificate ?? NO_STARTTLS) : NO_STARTTLS
      if (fresh) sessions.push({ mxHost: host.name, resultType: check.valid ? 'success' : check.resultType })
      if (check.valid || policy.mode === 'testing') return true
      // A kept connection and a new one to the same host are one reason, said once.
      const why = `${host.name} [${address}] ${check.detail}`
      if (!refusals.includes(why)) refusals.push(why)
      refused = { mxHostname: host.name, mxAddress: address, tls: conn.tls, certValid: certValidOf(conn) }
      conn.quit()
      return false
    }
    const run = async (conn: SmtpSession, host: MxHost, address: string, key: string): Promise<Attempt> => {
      const on = { mxHostname: host.name, mxAddress: address, tls: conn.tls, certValid: certValidOf(conn), sessions }
      const raw = await (body ??= load())
      if (!raw) {
        this.park(key, conn)
        return {
          ...on,
          replies: sameReply(envelope.to, { code: 554, response: '5.3.0 the message body is missing from the queue' }),
        }
      }
      return { ...on, replies: await this.transaction(conn, key, envelope, raw, sent) }
    }
    let last: Reply = { code: null, response: 'no MX host could be reached' }
    for (const host of hosts) {
      for (const address of host.addresses) {
        const key = `${host.name}|${address}|${host.port}`
        // A parked connection goes straight into the next transaction. If it turns out to have
        // died meanwhile (no reply at all), the transaction is run again on a new connection.
        const parked = this.unpark(key)
        if (parked && passes(parked, host, address, false)) {
          const attempt = await run(parked, host, address, key)
          if (![...attempt.replies.values()].every((r) => r.code === null)) return attempt
        }
        let conn: SmtpSession
        try {
          conn = await SmtpSession.open({
            address,
            port: host.port,
            hostname: host.name,
            heloName: this.options.heloName,
            timeout: this.options.timeout,
            secureContext: this.options.secureContext,
          })
        } catch (err) {
          const reply = replyOf(err)
          last = { ...reply, response: `${host.name} [${address}]:${host.port}: ${reply.response}` }
          continue
        }
        if (passes(conn, host, address, true)) return run(conn, host, address, key)
      }
    }
    // Refused by the policy: a transient failure (RFC 8461 §5.1: the policy may be fixed, or a
    // valid certificate installed, before the message expires), saying why.
    if (refused && policy)
      return {
        ...(refused as Omit<Attempt, 'replies'>),
        sessions,
        replies: sameReply(envelope.to, {
          code: 451,
          response: `4.7.5 MTA-STS policy of ${policy.domain} (enforce): ${refusals.join('; ')}`,
        }),
      }
    return {
      mxHostname: hosts[0]?.name ?? null,
      mxAddress: null,
      tls: null,
      sessions,
      replies: sameReply(envelope.to, last),
    }
  }

  /** Closes every idle connection. */
  close(): void {
    for (const list of this.idle.values()) for (const { conn, timer } of list) clearTimeout(timer), conn.quit()
    this.idle.clear()
  }

  private async transaction(
    conn: SmtpSession,
    key: string,
    envelope: { from: string; to: string[] },
    raw: Buffer,
    sent?: () => void,
  ): Promise<Map<string, Reply>> {
    let parked = false
    try {
      const { replies, clean } = await conn.send(envelope, raw, () => {
        // The message is out: the connection can take the next transaction before its reply.
        parked = true
        this.park(key, conn)
        sent?.()
      })
      if (parked) return replies
      // After a refusal the server may still hold the transaction open: RSET ends it first.
      if (clean) this.park(key, conn)
      else void conn.reset().then((ok) => (ok ? this.park(key, conn) : conn.close()))
      return replies
    } catch (err) {
      // No reply: the connection is gone, or in a state no later transaction should meet.
      conn.close()
      if (!(err instanceof SmtpNetworkError)) throw err
      return sameReply(envelope.to, replyOf(err))
    }
  }

  /** The most recently parked connection to this host, if any. */
  private unpark(key: string): SmtpSession | undefined {
    const entry = this.idle.get(key)?.pop()
    if (!entry) return undefined
    clearTimeout(entry.timer)
    entry.conn.removeCloseListener(entry.onEnd)
    return entry.conn
  }

  private park(key: string, conn: SmtpSession): void {
    const list = this.idle.get(key) ?? []
    this.idle.set(key, list)
    const drop = () => {
      const i = list.indexOf(entry)
      if (i >= 0) list.splice(i, 1)
      clearTimeout(entry.timer)
    }
    const entry = {
      conn,
      timer: setTimeout(() => (drop(), conn.quit()), IDLE_MS),
      // A parked connection that the server closes is dropped quietly.
      onEnd: drop,
    }
    entry.timer.unref()
    conn.onClose(entry.onEnd)
    list.push(entry)
  }
}

/** Whether a connection's certificate was valid for the MX name; null without TLS. */
const certValidOf = (conn: SmtpSession) => (conn.tls ? (conn.certificate?.valid ?? null) : null)
