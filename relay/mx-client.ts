import SMTPConnection from 'nodemailer/lib/smtp-connection'
import type { MxHost } from './routes.js'

/** A destination's answer for one recipient; `code` is null when none came (timeout, dropped connection). */
export interface Reply {
  code: number | null
  response: string
}

export interface Attempt {
  /** The MX host the transaction ran on, or null when none could be reached. */
  mxHostname: string | null
  replies: Map<string, Reply>
}

interface SmtpError extends Error {
  code?: string
  responseCode?: number
  response?: string
  recipient?: string
  rejectedErrors?: SmtpError[]
}

/** How long an open connection waits for the next transaction to the same host. */
const IDLE_MS = 5_000

const replyCode = (response: string | undefined): number | null => {
  const m = /^(\d{3})/.exec(response ?? '')
  return m ? Number(m[1]) : null
}
/** The same reply for every recipient. */
export const sameReply = (recipients: string[], reply: Reply) => new Map(recipients.map((r) => [r, reply]))

const replyOf = (err: SmtpError): Reply => ({ code: err.responseCode ?? replyCode(err.response), response: (err.response ?? err.message).trim() })

/**
 * Outbound SMTP toward destination MX hosts: opportunistic STARTTLS (certificates are not
 * checked, as is usual between MTAs), and connections kept open a few seconds for the next
 * transaction to the same host.
 */
export class MxClient {
  private idle = new Map<string, { conn: SMTPConnection; timer: NodeJS.Timeout; onEnd: () => void }[]>()

  constructor(private readonly options: { heloName: string; timeout: number }) {}

  /**
   * Delivers one message to a set of recipients at one domain, trying the hosts in order until
   * one answers. Every recipient gets a reply: the destination's, or a transient one when no
   * host could be reached or the connection broke.
   */
  async deliver(hosts: MxHost[], envelope: { from: string; to: string[] }, load: () => Promise<Buffer | undefined>): Promise<Attempt> {
    // The bytes are read once, and only once a host answered: a destination that is down costs no memory.
    let body: Promise<Buffer | undefined> | undefined
    const run = async (conn: SMTPConnection, host: MxHost, key: string): Promise<Attempt> => {
      const raw = await (body ??= load())
      if (!raw) {
        this.park(key, conn)
        return { mxHostname: host.name, replies: sameReply(envelope.to, { code: 554, response: '5.3.0 the message body is missing from the queue' }) }
      }
      return { mxHostname: host.name, replies: await this.transaction(conn, key, envelope, raw) }
    }
    let last: Reply = { code: null, response: 'no MX host could be reached' }
    for (const host of hosts) {
      for (const address of host.addresses) {
        const key = `${host.name}|${address}|${host.port}`
        // A parked connection goes straight into the next transaction. If it turns out to have
        // died meanwhile (no reply at all), the transaction is run again on a new connection.
        const parked = this.unpark(key)
        if (parked) {
          const attempt = await run(parked, host, key)
          if (![...attempt.replies.values()].every((r) => r.code === null)) return attempt
        }
        let conn: SMTPConnection
        try {
          conn = await this.connect(host, address)
        } catch (err) {
          const reply = replyOf(err as SmtpError)
          last = { ...reply, response: `${host.name} [${address}]:${host.port}: ${reply.response}` }
          continue
        }
        return run(conn, host, key)
      }
    }
    return { mxHostname: hosts[0]?.name ?? null, replies: sameReply(envelope.to, last) }
  }

  /** Closes every idle connection. */
  close(): void {
    for (const list of this.idle.values()) for (const { conn, timer } of list) clearTimeout(timer), conn.quit()
    this.idle.clear()
  }

  private transaction(conn: SMTPConnection, key: string, envelope: { from: string; to: string[] }, raw: Buffer): Promise<Map<string, Reply>> {
    return new Promise((resolve) => {
      let settled = false
      /** `reuse`: 'as is' after a completed transaction, 'reset' after a refusal (RSET ends what the server may hold open). */
      const finish = (replies: Map<string, Reply>, reuse: 'as is' | 'reset' | 'no') => {
        if (settled) return
        settled = true
        conn.removeListener('error', onError)
        if (reuse === 'as is') this.park(key, conn)
        else if (reuse === 'reset') conn.reset((err) => (err ? conn.close() : this.park(key, conn)))
        else conn.close()
        resolve(replies)
      }
      const all = (reply: Reply) => sameReply(envelope.to, reply)
      const onError = (err: SmtpError) => finish(all(replyOf(err)), 'no')
      conn.once('error', onError)
      conn.send({ from: envelope.from, to: envelope.to, size: raw.length }, raw, (err, info) => {
        if (err) {
          const e = err as SmtpError
          // A reply (refused envelope or message) leaves the connection usable; a network error does not.
          if (!e.responseCode) return finish(all(replyOf(e)), 'no')
          const replies = all(replyOf(e))
          for (const r of e.rejectedErrors ?? []) if (r.recipient) replies.set(r.recipient, replyOf(r))
          return finish(replies, 'reset')
        }
        const ok: Reply = { code: replyCode(info.response) ?? 250, response: info.response.trim() }
        const replies = all(ok)
        for (const r of (info.rejectedErrors ?? []) as SmtpError[]) if (r.recipient) replies.set(r.recipient, replyOf(r))
        finish(replies, 'as is')
      })
    })
  }

  /** The most recently parked connection to this host, if any. */
  private unpark(key: string): SMTPConnection | undefined {
    const entry = this.idle.get(key)?.pop()
    if (!entry) return undefined
    clearTimeout(entry.timer)
    entry.conn.removeListener('end', entry.onEnd)
    return entry.conn
  }

  private connect(host: MxHost, address: string): Promise<SMTPConnection> {
    return new Promise((resolve, reject) => {
      const conn = new SMTPConnection({
        host: address,
        port: host.port,
        name: this.options.heloName,
        servername: host.name,
        opportunisticTLS: true,
        tls: { rejectUnauthorized: false },
        connectionTimeout: this.options.timeout,
        greetingTimeout: this.options.timeout,
        socketTimeout: this.options.timeout,
      })
      const onError = (err: Error) => reject(err)
      conn.once('error', onError)
      // Errors of a parked connection need a listener; a transaction adds its own.
      conn.on('error', () => {})
      conn.connect(() => {
        conn.removeListener('error', onError)
        resolve(conn)
      })
    })
  }

  private park(key: string, conn: SMTPConnection): void {
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
    conn.once('end', entry.onEnd)
    list.push(entry)
  }
}
