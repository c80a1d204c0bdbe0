import { connect, type Socket } from 'node:net'

/**
 * A lean SMTP load client, run as its own process: plain sockets, PIPELINING of MAIL, RCPT and
 * DATA, one pre-built 4 KB message reused for every send (no MIME building per message).
 *   node smtp-load.js host port sessions messages [user pass]
 * Prints `{"sent": n, "ms": t}` when every session is done.
 */

class Session {
  private buffer = ''
  private waiting: ((line: string) => void)[] = []
  private constructor(private readonly socket: Socket) {
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      this.buffer += chunk
      let i: number
      while ((i = this.buffer.indexOf('\r\n')) >= 0) {
        const line = this.buffer.slice(0, i)
        this.buffer = this.buffer.slice(i + 2)
        // A final reply line is "NNN text"; "NNN-text" continues.
        if (/^\d{3}(?: |$)/.test(line)) this.waiting.shift()?.(line)
      }
    })
  }

  static open(host: string, port: number): Promise<Session> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, host, () => resolve(new Session(socket)))
      socket.once('error', reject)
    })
  }

  reply(): Promise<string> {
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  async command(text: string, expect: string): Promise<void> {
    const r = this.reply()
    this.socket.write(text + '\r\n')
    const line = await r
    if (!line.startsWith(expect)) throw new Error(`${text.split(' ')[0]}: ${line}`)
  }

  /** MAIL, RCPT and DATA in one write (PIPELINING), then the message. */
  async send(from: string, to: string, message: Buffer): Promise<void> {
    const replies = [this.reply(), this.reply(), this.reply()]
    this.socket.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`)
    const [mail, rcpt, data] = await Promise.all(replies)
    if (!mail.startsWith('250') || !rcpt.startsWith('25') || !data.startsWith('354')) throw new Error(`envelope: ${mail} / ${rcpt} / ${data}`)
    const done = this.reply()
    this.socket.write(message)
    const line = await done
    if (!line.startsWith('250')) throw new Error(`message: ${line}`)
  }

  close(): void {
    this.socket.end('QUIT\r\n')
  }
}

export function buildMessage(size: number): Buffer {
  const head = 'From: load@bench.example\r\nTo: sink@bench.example\r\nSubject: load test\r\nMessage-ID: <load@bench.example>\r\nMIME-Version: 1.0\r\n\r\n'
  const line = 'x'.repeat(76) + '\r\n'
  let body = ''
  while (head.length + body.length + line.length <= size - 3) body += line
  return Buffer.from(head + body + '.\r\n', 'latin1')
}

async function main(): Promise<void> {
  const [host, port, sessions, messages, user, pass] = process.argv.slice(2)
  const message = buildMessage(4096)
  const total = Number(messages)
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: Number(sessions) }, async () => {
      const s = await Session.open(host, Number(port))
      await s.reply()
      await s.command('EHLO bench.example', '250')
      if (user) await s.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`, '235')
      while (next < total) {
        next++
        await s.send('load@bench.example', 'sink@bench.example', message)
      }
      s.close()
    }),
  )
  process.stdout.write(JSON.stringify({ sent: total, ms: performance.now() - started }) + '\n')
}

if (process.argv[1]?.endsWith('smtp-load.js')) {
  main().catch((err) => {
    process.stderr.write(String(err) + '\n')
    process.exit(1)
  })
}
