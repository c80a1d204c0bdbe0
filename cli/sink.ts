import { InvalidArgumentError, type Command } from 'commander'
import type { AddressInfo } from 'node:net'

/** Bytes of each message printed; the rest is counted, not shown. */
const SHOWN = 64 * 1024

const port = (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) > 65535)
    throw new InvalidArgumentError('--port must be a port number, 0 to 65535')
  return Number(value)
}

/**
 * `sink`: a local SMTP server that takes every message and prints it, so that mailroom can be
 * tried on one machine (MAILROOM_SMARTHOST pointed at it) without sending real mail.
 */
export function addSinkCommand(program: Command): void {
  program
    .command('sink')
    .description(
      'Run a local SMTP server that accepts every message and prints it: point MAILROOM_SMARTHOST at it to try mailroom without sending real mail',
    )
    .option('--port <port>', 'port to listen on (0: any free port)', port, 2626)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--json', 'print one JSON line per message (envelope, size, the message as text) instead')
    .action(async (o: { port: number; host: string; json?: boolean }) => {
      const { SMTPServer } = await import('smtp-server')
      let count = 0
      const server = new SMTPServer({
        // Nothing to log in to, nothing to encrypt: it only ever listens where the operator says.
        disabledCommands: ['AUTH', 'STARTTLS'],
        authOptional: true,
        banner: 'mailroom sink: every message is accepted and printed, none is delivered',
        logger: false,
        onData(stream, session, callback) {
          const chunks: Buffer[] = []
          let size = 0
          stream.on('data', (chunk: Buffer) => {
            if (size < SHOWN) chunks.push(chunk)
            size += chunk.length
          })
          stream.on('end', () => {
            const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
            const to = session.envelope.rcptTo.map((r) => r.address)
            const text = Buffer.concat(chunks).subarray(0, SHOWN).toString('utf8')
            count++
            if (o.json) process.stdout.write(`${JSON.stringify({ n: count, from, to, size, message: text })}\n`)
            else {
              const more = size > SHOWN ? `\n[… ${size - SHOWN} more bytes not shown]` : ''
              process.stdout.write(
                `--- message ${count}: from <${from}> to ${to.map((t) => `<${t}>`).join(', ')}, ${size} bytes\n${text.trimEnd()}${more}\n\n`,
              )
            }
            callback(null, `accepted by the sink as message ${count}`)
          })
        },
      })
      await new Promise<void>((resolve, reject) => {
        server.server.once('error', (err) => reject(new Error(`cannot listen on ${o.host}:${o.port}: ${err.message}`)))
        server.listen(o.port, o.host, () => resolve())
      })
      const address = server.server.address() as AddressInfo
      process.stderr.write(
        `mailroom sink: listening on ${o.host}:${address.port}; start mailroom with MAILROOM_SMARTHOST=${o.host}:${address.port} (Ctrl-C stops)\n`,
      )
      const stop = () => server.close(() => process.exit(0))
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })
}
