import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'

/** Bytes of each message printed; the rest is counted, not shown. */
const SHOWN = 64 * 1024

/**
 * A local SMTP server that takes every message and prints it through `write`, as text or as one
 * JSON line each: where mailroom can deliver while it is tried on one machine, sending no real
 * mail (`mailroom sink`, and `mailroom serve --sink`, which runs one of its own).
 */
export async function startLocalSink(options: {
  host: string
  port: number
  json?: boolean
  write: (text: string) => void
}): Promise<{ port: number; close(): Promise<void> }> {
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
        if (options.json) options.write(`${JSON.stringify({ n: count, from, to, size, message: text })}\n`)
        else {
          const more = size > SHOWN ? `\n[… ${size - SHOWN} more bytes not shown]` : ''
          options.write(
            `--- message ${count}: from <${from}> to ${to.map((t) => `<${t}>`).join(', ')}, ${size} bytes\n${text.trimEnd()}${more}\n\n`,
          )
        }
        callback(null, `accepted by the sink as message ${count}`)
      })
    },
  })
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', (err) =>
      reject(new Error(`cannot listen on ${options.host}:${options.port}: ${err.message}`)),
    )
    server.listen(options.port, options.host, () => resolve())
  })
  return {
    port: (server.server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
