import { isAscii as isAsciiBytes } from 'node:buffer'
import { connect as netConnect, isIP, type Socket } from 'node:net'
import { connect as tlsConnect, type SecureContext, type TLSSocket } from 'node:tls'
import { isAscii } from './addresses.js'
import { type CertificateCheck, checkCertificate } from './mx-certificate.js'

/** A destination's answer for one recipient; `code` is null when none came (timeout, dropped connection). */
export interface Reply {
  code: number | null
  response: string
  /**
   * True for the reply to this recipient's own RCPT TO: only such a reply speaks of the
   * recipient's mailbox (one to MAIL FROM or to the message is about the sender or the message).
   */
  toRcpt?: boolean
}

/** A failure with no reply from the server behind it (refused connection, timeout, hang-up). */
export class SmtpNetworkError extends Error {}

/** The same reply for every recipient. */
export const sameReply = (recipients: string[], reply: Reply) => new Map(recipients.map((r) => [r, reply]))

/** A refusal while the session was being set up (greeting, EHLO), with the server's reply. */
export class SmtpRefusal extends Error {
  constructor(readonly reply: Reply) {
    super(reply.response)
  }
}

export interface SessionOptions {
  /** The address to connect to. */
  address: string
  port: number
  /** The MX host's name: the TLS server name. */
  hostname: string
  /** Our name in EHLO. */
  heloName: string
  /** How long connecting, and then each wait for a reply, may take. */
  timeout: number
  /** The CAs a certificate is checked against: the system's, unless the operator added one (MAILROOM_OUTBOUND_CA). */
  secureContext?: SecureContext
}

const CRLF = Buffer.from('\r\n')

/** Characters of a reply line kept; the rest is dropped (RFC 5321 §4.5.3.1.5: 512 octets at most). */
export const MAX_REPLY_LINE = 1000
/** A reply longer than this, or of more lines, ends the connection. */
export const MAX_REPLY_LENGTH = 64 * 1024
export const MAX_REPLY_LINES = 100

/** A server's text kept to `max` characters, marked where it was cut. */
export const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)} [cut]` : text)

/**
 * One SMTP client session toward a destination MX: EHLO (HELO for servers that refuse it),
 * opportunistic STARTTLS (any certificate is taken, as is usual between MTAs, and what it proved
 * is kept for an MTA-STS policy to judge), then
 * transactions. With PIPELINING (RFC 2920) MAIL, every RCPT and DATA leave in one write and the
 * message with its terminating dot in one more: a transaction costs two writes and two round
 * trips. The next transaction need not wait for the reply to the message: once the dot is out,
 * the server's next command is MAIL again whatever it answers, so the next MAIL, RCPT and DATA
 * leave in the same write as the dot (RFC 2920 §3.1 lets the message start a group of commands),
 * and a connection that carries one message after the other costs one write and one round trip
 * per message. The reply to a dot counts only once the replies to the commands sent with it are
 * in too, so that a reply to the next MAIL is never taken for the message's.
 */
export class SmtpSession {
  private socket: Socket | TLSSocket
  private extensions = new Set<string>()
  /** The reply line being read (at most MAX_REPLY_LINE + 1 characters of it), and the reply's lines before it. */
  private buffer = ''
  private lines: string[] = []
  /** Characters of the reply being read, cut ones included. */
  private replyLength = 0
  /** Runs while a reply has begun and not ended. */
  private replyTimer: NodeJS.Timeout | null = null
  /** Callers waiting for the next replies, in the order of the commands sent. */
  private waiting: Waiter[] = []
  /**
   * Replies to ends of data, held until every command sent so far has its reply. A server that
   * never answers a message's dot answers the next MAIL (pipelined with the dot) instead, and that
   * reply would be read as the message's: only when the count of replies comes out even is each
   * reply known to be its own command's (RFC 5321 §4.1.1.4; RFC 2920 §3.1). A connection that
   * ends first leaves the message without a reply: deferred, never delivered.
   */
  private unconfirmed: { waiter: Waiter; reply: Reply }[] = []
  private closedWith: Error | null = null
  private closeListeners: (() => void)[] = []
  private encrypted = false
  private checked: CertificateCheck | null = null

  private constructor(
    socket: Socket,
    private readonly options: SessionOptions,
  ) {
    this.socket = socket
    this.attach(socket)
  }

  /** Connects, reads the greeting, says EHLO and upgrades to TLS when the server offers it. */
  static async open(options: SessionOptions): Promise<SmtpSession> {
    const socket = netConnect({ host: options.address, port: options.port })
    socket.setNoDelay(true)
    const session = new SmtpSession(socket, options)
    const greeting = session.next()
    const deadline = setTimeout(
      () => session.close(new SmtpNetworkError(`connection timed out after ${options.timeout} ms`)),
      options.timeout,
    )
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve)
        greeting.catch(reject)
      })
      session.expect(await greeting, 2)
      await session.hello()
      if (session.extensions.has('STARTTLS')) {
        session.expect(await session.command('STARTTLS'), 2)
        await session.upgrade()
        await session.hello()
      }
      session.socket.setTimeout(options.timeout)
      return session
    } catch (err) {
      session.close()
      throw err
    } finally {
      clearTimeout(deadline)
    }
  }

  /** False once the connection is gone. */
  get connected(): boolean {
    return this.closedWith === null
  }

  /** Whether the session was upgraded to TLS (STARTTLS). */
  get tls(): boolean {
    return this.encrypted
  }

  /** What the MX certificate proved for the host name; null without TLS. Travels with a parked connection. */
  get certificate(): CertificateCheck | null {
    return this.checked
  }

  /** Called once when the connection is gone. */
  onClose(listener: () => void): void {
    this.closeListeners.push(listener)
  }

  removeCloseListener(listener: () => void): void {
    this.closeListeners = this.closeListeners.filter((l) => l !== listener)
  }

  /**
   * One mail transaction. Every recipient gets a reply: its RCPT refusal, or the refusal of MAIL
   * or of the message, or the final reply. `clean` is false when a refusal may have left the
   * transaction open on the server (RSET ends it). Throws SmtpNetworkError when no reply came.
   * With PIPELINING, `sent` is called once the message is written, before its reply: the session
   * may then carry the next transaction, whose commands go out with the message's end.
   */
  async send(
    envelope: { from: string; to: string[] },
    raw: Buffer,
    sent?: () => void,
  ): Promise<{ replies: Map<string, Reply>; clean: boolean }> {
    const params: string[] = []
    if (this.extensions.has('SIZE')) params.push(`SIZE=${raw.length}`)
    // RFC 6152: 8-bit content is declared to a server that takes it. One that does not is sent it
    // all the same, as submitted (converting it would break a DKIM signature).
    if (this.extensions.has('8BITMIME') && !isAsciiBytes(raw)) params.push('BODY=8BITMIME')
    if (this.extensions.has('SMTPUTF8') && ![envelope.from, ...envelope.to].every(isAscii)) params.push('SMTPUTF8')
    const mailLine = `MAIL FROM:<${envelope.from}>${params.length ? ` ${params.join(' ')}` : ''}`
    const rcptLines = envelope.to.map((to) => `RCPT TO:<${to}>`)
    const everyone = (reply: Reply) => ({ replies: sameReply(envelope.to, reply), clean: false })
    let mail: Reply
    let rcpts: Reply[]
    let data: Reply | undefined
    if (this.extensions.has('PIPELINING')) {
      const replies = await Promise.all(this.pipeline([mailLine, ...rcptLines, 'DATA']))
      mail = replies[0]
      rcpts = replies.slice(1, -1)
      data = replies[replies.length - 1]
    } else {
      mail = await this.command(mailLine)
      if (!positive(mail)) return everyone(mail)
      rcpts = []
      for (const line of rcptLines) rcpts.push(await this.command(line))
      if (rcpts.some(positive)) data = await this.command('DATA')
    }
    if (!positive(mail)) {
      // RFC 2920 §3.1: a DATA accepted after all is given an empty message.
      if (data?.code === 354) await this.message(Buffer.alloc(0))
      return everyone(mail)
    }
    const replies = new Map(envelope.to.map((to, i): [string, Reply] => [to, { ...rcpts[i], toRcpt: true }]))
    const accepted = envelope.to.filter((_, i) => positive(rcpts[i]))
    if (accepted.length === 0) {
      if (data?.code === 354) await this.message(Buffer.alloc(0))
      return { replies, clean: false }
    }
    if (data!.code !== 354) {
      for (const to of accepted) replies.set(to, data!)
      return { replies, clean: false }
    }
    const reply = this.message(raw)
    if (this.extensions.has('PIPELINING')) sent?.()
    const final = await reply
    for (const to of accepted) replies.set(to, final)
    // The dot ended the transaction, whatever the reply (RFC 5321 §4.1.1.4): no RSET is needed.
    return { replies, clean: true }
  }

  /** RSET: true when the server confirmed it. */
  async reset(): Promise<boolean> {
    try {
      return (await this.command('RSET')).code === 250
    } catch {
      return false
    }
  }

  /** QUIT, then the connection ends. */
  quit(): void {
    if (!this.connected) return
    this.command('QUIT').then(
      () => this.close(),
      () => this.close(),
    )
  }

  close(reason = new SmtpNetworkError('connection closed')): void {
    this.fail(reason)
    this.socket.destroy()
  }

  private async hello(): Promise<void> {
    let reply = await this.command(`EHLO ${this.options.heloName}`)
    this.extensions.clear()
    if (reply.code !== 250) {
      reply = await this.command(`HELO ${this.options.heloName}`)
      this.expect(reply, 2)
      return
    }
    for (const line of reply.response.split('\n').slice(1)) {
      const [keyword, arg] = line.slice(4).toUpperCase().split(/\s+/)
      if (keyword) this.extensions.add(keyword)
      if (keyword === 'SIZE' && arg === '0') this.extensions.delete('SIZE')
    }
  }

  private upgrade(): Promise<void> {
    const plain = this.socket as Socket
    plain.removeAllListeners('data')
    plain.removeAllListeners('close')
    plain.removeAllListeners('error')
    plain.removeAllListeners('timeout')
    return new Promise((resolve, reject) => {
      const name = this.options.hostname
      // Not refused here: opportunistic TLS takes any certificate; an MTA-STS policy in enforce
      // mode refuses one that is not valid (relay/mx-client.ts), knowing why from `certificate`.
      const secure = tlsConnect({
        socket: plain,
        rejectUnauthorized: false,
        ...(this.options.secureContext ? { secureContext: this.options.secureContext } : {}),
        ...(isIP(name) ? {} : { servername: name }),
      })
      secure.once('secureConnect', () => {
        secure.removeListener('error', reject)
        this.checked = checkCertificate(secure, name)
        this.socket = secure
        this.encrypted = true
        this.attach(secure)
        resolve()
      })
      secure.once('error', reject)
      secure.once('close', () =>
        reject(this.closedWith ?? new SmtpNetworkError('the connection closed during the TLS handshake')),
      )
    })
  }

  private expect(reply: Reply, kind: 2 | 3): void {
    if (reply.code === null || Math.floor(reply.code / 100) !== kind) throw new SmtpRefusal(reply)
  }

  /**
   * Sends the message: dot-stuffed, with CRLF line ends and the terminating dot, in one write,
   * made at the end of this turn of the event loop so that the next transaction's commands,
   * if they come meanwhile, join it.
   */
  private message(raw: Buffer): Promise<Reply> {
    const reply = this.next(true)
    if (this.connected) {
      const socket = this.socket
      socket.cork()
      for (const piece of toDataLines(raw)) socket.write(piece)
      setImmediate(() => socket.uncork())
    }
    return reply
  }

  private command(line: string): Promise<Reply> {
    return this.pipeline([line])[0]
  }

  private pipeline(lines: string[]): Promise<Reply>[] {
    const replies = lines.map(() => this.next())
    if (this.connected) this.socket.write(`${lines.join('\r\n')}\r\n`)
    return replies
  }

  /** The next reply to arrive; for the end of data, once the replies to the commands sent after it are in too. */
  private next(endOfData = false): Promise<Reply> {
    const reply = this.closedWith
      ? Promise.reject(this.closedWith)
      : new Promise<Reply>((resolve, reject) => this.waiting.push({ resolve, reject, endOfData }))
    // A caller that stops at the first failed reply leaves the later ones unread.
    reply.catch(() => {})
    return reply
  }

  private attach(socket: Socket | TLSSocket): void {
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => this.read(chunk))
    socket.on('timeout', () => {
      this.fail(new SmtpNetworkError(`no reply within ${this.options.timeout} ms`))
      socket.destroy()
    })
    socket.on('error', (err) => this.fail(new SmtpNetworkError(err.message)))
    socket.on('close', () => this.fail(new SmtpNetworkError('the server closed the connection')))
  }

  /**
   * Reads replies as they arrive, within bounds a hostile or broken server cannot push past: a
   * line is kept up to MAX_REPLY_LINE characters (RFC 5321 §4.5.3.1.5 allows 512 octets; the rest
   * is read and dropped), and a reply that runs past MAX_REPLY_LENGTH or MAX_REPLY_LINES, that
   * has not ended `timeout` ms after it began, or that no command asked for ends the connection:
   * its waiters get an SmtpNetworkError saying why (a temporary failure, tried again later).
   */
  private read(chunk: string): void {
    for (let from = 0; from < chunk.length && this.connected; ) {
      const lf = chunk.indexOf('\n', from)
      const end = lf < 0 ? chunk.length : lf + 1
      this.replyLength += end - from
      if (this.replyLength > MAX_REPLY_LENGTH) {
        this.drop(`the server's reply ran past ${MAX_REPLY_LENGTH} bytes; connection dropped`)
        return
      }
      // One character past the limit is kept, to tell a line that was cut.
      if (this.buffer.length <= MAX_REPLY_LINE)
        this.buffer += chunk.slice(from, Math.min(end, from + MAX_REPLY_LINE + 1 - this.buffer.length))
      from = end
      if (lf >= 0) this.endLine()
    }
    const midReply = this.connected && (this.buffer !== '' || this.lines.length > 0)
    if (midReply && !this.replyTimer) {
      const { timeout } = this.options
      this.replyTimer = setTimeout(
        () => this.drop(`the server's reply did not end within ${timeout} ms; connection dropped`),
        timeout,
      )
    } else if (!midReply) this.clearReplyTimer()
  }

  private endLine(): void {
    const line = cut(this.buffer.replace(/\r?\n?$/, ''), MAX_REPLY_LINE)
    this.buffer = ''
    this.lines.push(line)
    // The last line of a reply has a space (or nothing) after its code.
    if (line.length > 3 && line[3] === '-') {
      if (this.lines.length >= MAX_REPLY_LINES)
        this.drop(`the server's reply ran past ${MAX_REPLY_LINES} lines; connection dropped`)
      return
    }
    const response = this.lines.join('\n')
    this.lines = []
    this.replyLength = 0
    const code = /^[2-5]\d\d$/.test(response.slice(0, 3)) ? Number(response.slice(0, 3)) : null
    const waiter = this.waiting.shift()
    // A reply no command asked for would be taken as the answer to the next one.
    if (!waiter) return void this.drop('the server sent a reply no command asked for; connection dropped')
    if (waiter.endOfData) this.unconfirmed.push({ waiter, reply: { code, response } })
    else waiter.resolve({ code, response })
    if (this.waiting.length === 0) for (const { waiter, reply } of this.unconfirmed.splice(0)) waiter.resolve(reply)
  }

  private drop(reason: string): void {
    this.close(new SmtpNetworkError(reason))
  }

  private clearReplyTimer(): void {
    if (this.replyTimer) clearTimeout(this.replyTimer)
    this.replyTimer = null
  }

  private fail(err: Error): void {
    if (this.closedWith) return
    this.closedWith = err
    this.clearReplyTimer()
    for (const w of [...this.unconfirmed.splice(0).map((u) => u.waiter), ...this.waiting.splice(0)]) w.reject(err)
    for (const l of this.closeListeners.splice(0)) l()
  }
}

interface Waiter {
  resolve: (r: Reply) => void
  reject: (e: Error) => void
  /** The reply to a message's terminating dot: held until the replies are known to be in step. */
  endOfData: boolean
}

const positive = (r: Reply | undefined) => r !== undefined && r.code !== null && r.code >= 200 && r.code < 300

/**
 * The message as DATA lines (RFC 5321 §4.5.2): a dot at the start of a line doubled, bare CR and
 * LF made CRLF (a lone CR read as a line end would let "\r.\r" end the data early), a final CRLF
 * if missing, then the terminating dot. The pieces share the message's memory: it is not copied.
 */
export function toDataLines(raw: Buffer): Buffer[] {
  const last = raw.length ? raw[raw.length - 1] : 0x0a
  const end = last === 0x0a ? END : last === 0x0d ? END_AFTER_CR : END_NO_EOL
  if (isClean(raw)) return [raw, end]
  const pieces: Buffer[] = []
  let from = 0
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]
    const prev = i === 0 ? 0x0a : raw[i - 1]
    let insert: Buffer | null = null
    if (byte === 0x0a && prev !== 0x0d) insert = CR
    else if (prev === 0x0d && byte !== 0x0a) insert = byte === 0x2e ? LF_DOT : LF
    else if (byte === 0x2e && prev === 0x0a) insert = DOT
    if (insert) {
      pieces.push(raw.subarray(from, i), insert)
      from = i
    }
  }
  pieces.push(raw.subarray(from), end)
  // Past a few pieces, one buffer is cheaper to write than many.
  return pieces.length > 64 ? [Buffer.concat(pieces)] : pieces
}

/** True when every line ends in CRLF and none starts with a dot: the usual case, found with native searches. */
const isClean = (raw: Buffer) => raw[0] !== 0x2e && raw.indexOf('\n.') === -1 && hasOnlyCrlf(raw)

/** True when every line end is a CRLF: no bare LF, and no bare CR (what delivery writes as is). */
export function hasOnlyCrlf(raw: Buffer): boolean {
  let lines = 0
  for (let i = raw.indexOf(0x0a); i !== -1; i = raw.indexOf(0x0a, i + 1), lines++) if (raw[i - 1] !== 0x0d) return false
  // Every LF has its CR: any CR more is a bare one.
  let crs = 0
  for (let i = raw.indexOf(0x0d); i !== -1; i = raw.indexOf(0x0d, i + 1)) crs++
  return crs === lines
}

const CR = Buffer.from('\r')
const LF = Buffer.from('\n')
const LF_DOT = Buffer.from('\n.')
const DOT = Buffer.from('.')
const END = Buffer.from('.\r\n')
const END_AFTER_CR = Buffer.from('\n.\r\n')
const END_NO_EOL = Buffer.concat([CRLF, END])
