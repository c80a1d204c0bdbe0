import { readFileSync } from 'node:fs'
import { RawSmtp } from '../test/relay/submission-client.js'

/**
 * A lean SMTP load client, run as its own process: the tests' line-level client over plain
 * sockets, PIPELINING of MAIL, RCPT and DATA, one pre-built 4 KB message reused for every send
 * (no MIME building per message).
 *   node smtp-load.js host port sessions messages [user pass] [--from=A] [--to=A] [--message=FILE] [--starttls]
 * By default from load@bench.example to sink@bench.example, a message of its own; `--message` sends
 * that file's message instead (as it is: its lines end in CRLF), dot-stuffed once here.
 * `--starttls` upgrades each session with STARTTLS (any certificate) before AUTH, as a mail
 * program submitting to port 587 does; a session's TLS then carries all of its messages.
 * Prints `{"sent": n, "ms": t}` when every session is done.
 */

/** Throws unless the reply starts with the expected code. */
function expectReply(what: string, reply: string, code: string): void {
  if (!reply.startsWith(code)) throw new Error(`${what}: ${reply}`)
}

/** MAIL, RCPT and DATA in one write (PIPELINING), then the message. */
async function send(s: RawSmtp, from: string, to: string, message: Buffer): Promise<void> {
  const [mail, rcpt, data] = await s.pipeline([`MAIL FROM:<${from}>`, `RCPT TO:<${to}>`, 'DATA'])
  expectReply('MAIL', mail, '250')
  expectReply('RCPT', rcpt, '25')
  expectReply('DATA', data, '354')
  expectReply('message', await s.data(message), '250')
}

function buildMessage(size: number): Buffer {
  const head =
    'From: load@bench.example\r\nTo: sink@bench.example\r\nSubject: load test\r\nMessage-ID: <load@bench.example>\r\nMIME-Version: 1.0\r\n\r\n'
  const line = `${'x'.repeat(76)}\r\n`
  let body = ''
  while (head.length + body.length + line.length <= size - 3) body += line
  return Buffer.from(`${head + body}.\r\n`, 'latin1')
}

/** A message file as DATA sends it: dot-stuffed (RFC 5321 §4.5.2), ending in CRLF, then the final dot. */
function dataOf(message: Buffer): Buffer {
  let text = message.toString('latin1').replace(/^\./gm, '..')
  if (!text.endsWith('\r\n')) text += '\r\n'
  return Buffer.from(`${text}.\r\n`, 'latin1')
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const [host, port, sessions, messages, user, pass] = args.filter((a) => !a.startsWith('--'))
  const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const file = option('message')
  const message = file ? dataOf(readFileSync(file)) : buildMessage(4096)
  const from = option('from') ?? 'load@bench.example'
  const to = option('to') ?? 'sink@bench.example'
  const starttls = args.includes('--starttls')
  const total = Number(messages)
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: Number(sessions) }, async () => {
      const s = await RawSmtp.open(Number(port), host)
      expectReply('greeting', await s.greeting, '220')
      expectReply('EHLO', await s.cmd('EHLO bench.example'), '250')
      if (starttls) {
        expectReply('STARTTLS', await s.starttls(), '220')
        expectReply('EHLO', await s.cmd('EHLO bench.example'), '250')
      }
      if (user) expectReply('AUTH', await s.authPlain(user, pass), '235')
      while (next < total) {
        next++
        await send(s, from, to, message)
      }
      await s.cmd('QUIT')
      s.close()
    }),
  )
  process.stdout.write(`${JSON.stringify({ sent: total, ms: performance.now() - started })}\n`)
}

if (process.argv[1]?.endsWith('smtp-load.js')) {
  main().catch((err) => {
    process.stderr.write(`${String(err)}\n`)
    process.exit(1)
  })
}
