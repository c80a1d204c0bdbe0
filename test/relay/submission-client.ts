import { connect as netConnect, type Socket } from 'node:net'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import SMTPConnection from 'nodemailer/lib/smtp-connection'

/** What nodemailer's SMTPConnection hands back when the server refuses a command. */
export interface SmtpError extends Error {
  code?: string
  command?: string
  responseCode?: number
  response?: string
  rejected?: string[]
  rejectedErrors?: SmtpError[]
}

type SendInfo = Parameters<Parameters<SMTPConnection['send']>[2]>[1] & {}

/**
 * nodemailer's SMTPConnection with promises: a real SMTP client. `tls: true` (the default)
 * insists on STARTTLS; `tls: false` never issues it.
 */
export class SmtpClient {
  private constructor(readonly conn: SMTPConnection) {}

  static open(port: number, options: { tls?: boolean } = {}): Promise<SmtpClient> {
    const tls = options.tls ?? true
    const conn = new SMTPConnection({
      host: '127.0.0.1',
      port,
      name: 'client.example',
      requireTLS: tls,
      ignoreTLS: !tls,
      tls: { rejectUnauthorized: false },
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
      socketCloseTimeout: 0,
    })
    // Refusals come back through the callbacks; a broken socket would also be emitted here.
    conn.on('error', () => {})
    const client = new SmtpClient(conn)
    return new Promise((resolve, reject) => conn.connect((err) => (err ? reject(err) : resolve(client))))
  }

  /** True once STARTTLS succeeded. */
  get secure(): boolean {
    return this.conn.secure
  }

  login(user: string, pass: string, method: 'PLAIN' | 'LOGIN' = 'PLAIN'): Promise<void> {
    return new Promise((resolve, reject) =>
      this.conn.login({ user, pass, method }, (err) => (err ? reject(err) : resolve())),
    )
  }

  send(envelope: { from: string; to: string[] }, message: string | Buffer): Promise<SendInfo> {
    return new Promise((resolve, reject) =>
      this.conn.send(envelope, message, (err, info) => (err ? reject(err) : resolve(info!))),
    )
  }

  /** RSET: ends a transaction the server left open (e.g. every RCPT refused after MAIL was accepted). */
  reset(): Promise<void> {
    return new Promise((resolve, reject) => this.conn.reset((err) => (err ? reject(err) : resolve())))
  }

  close(): void {
    this.conn.close()
  }
}

/** Awaits a promise that must reject, and returns its error. */
export async function refusal(promise: Promise<unknown>): Promise<SmtpError> {
  try {
    await promise
  } catch (err) {
    return err as SmtpError
  }
  throw new Error('expected the server to refuse, but it accepted')
}

/**
 * A line-level SMTP client for what nodemailer will not send on its own (a RCPT after a
 * refused MAIL, a SIZE parameter over the limit, pipelined commands): each command resolves with
 * the server's whole reply, lines joined with `\n`. The load client of the benchmark uses it too.
 */
export class RawSmtp {
  private socket: Socket | TLSSocket
  private buffer = ''
  private lines: string[] = []
  private waiting: ((reply: string) => void)[] = []
  private replies: string[] = []
  greeting: Promise<string>

  private constructor(socket: Socket) {
    this.socket = socket
    this.listen(socket)
    this.greeting = this.next()
  }

  /**
   * `localAddress`: the address to connect from (any of 127.0.0.0/8 reaches a server on 127.0.0.1);
   * `implicitTls`: TLS from the first byte (RFC 8314), the server's self-signed certificate not verified.
   */
  static open(port: number, host = '127.0.0.1', localAddress?: string, implicitTls = false): Promise<RawSmtp> {
    return new Promise((resolve, reject) => {
      const plain = netConnect({ host, port, localAddress })
      const socket = implicitTls
        ? tlsConnect({ socket: plain, rejectUnauthorized: false, servername: 'localhost' })
        : plain
      socket.once('error', reject)
      socket.once(implicitTls ? 'secureConnect' : 'connect', () => {
        socket.removeListener('error', reject)
        socket.on('error', () => {})
        resolve(new RawSmtp(socket))
      })
    })
  }

  private listen(socket: Socket | TLSSocket) {
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      this.buffer += chunk
      let i: number
      while ((i = this.buffer.indexOf('\r\n')) >= 0) {
        const line = this.buffer.slice(0, i)
        this.buffer = this.buffer.slice(i + 2)
        this.lines.push(line)
        // The last line of a reply has a space (or nothing) after the code.
        if (line.length <= 3 || line[3] === ' ') {
          const reply = this.lines.join('\n')
          this.lines = []
          const waiter = this.waiting.shift()
          if (waiter) waiter(reply)
          else this.replies.push(reply)
        }
      }
    })
  }

  /** The next reply, also one the server sends unprompted (a 421 before it closes the connection). */
  next(): Promise<string> {
    const ready = this.replies.shift()
    if (ready !== undefined) return Promise.resolve(ready)
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  /** Sends one command line and resolves with the reply. */
  cmd(line: string): Promise<string> {
    this.socket.write(`${line}\r\n`)
    return this.next()
  }

  /** Several command lines in one write (PIPELINING, RFC 2920); resolves with their replies in order. */
  pipeline(lines: string[]): Promise<string[]> {
    this.socket.write(lines.map((line) => `${line}\r\n`).join(''))
    return Promise.all(lines.map(() => this.next()))
  }

  /** Bytes as they are (a message after DATA, ending in CRLF.CRLF); resolves with the reply. */
  data(bytes: Buffer): Promise<string> {
    this.socket.write(bytes)
    return this.next()
  }

  /** Bytes as they are, with no reply awaited (part of a message, say). */
  write(bytes: string | Buffer): void {
    if (!this.socket.destroyed) this.socket.write(bytes)
  }

  /** STARTTLS, then the handshake (the server's certificate is self-signed: not verified). */
  async starttls(): Promise<string> {
    const reply = await this.cmd('STARTTLS')
    if (!reply.startsWith('220')) return reply
    const plain = this.socket
    plain.removeAllListeners('data')
    const secure = tlsConnect({ socket: plain as Socket, rejectUnauthorized: false, servername: 'localhost' })
    secure.on('error', () => {})
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', () => resolve())
      secure.once('error', reject)
    })
    this.socket = secure
    this.listen(secure)
    return reply
  }

  /** AUTH PLAIN in one line (RFC 4616: authzid NUL authcid NUL password). */
  authPlain(user: string, pass: string): Promise<string> {
    return this.cmd(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`)
  }

  /** Resolves once the connection is closed (by the server, say). */
  closed(): Promise<void> {
    if (this.socket.closed) return Promise.resolve()
    return new Promise((resolve) => this.socket.once('close', () => resolve()))
  }

  close(): void {
    this.socket.destroy()
  }
}
