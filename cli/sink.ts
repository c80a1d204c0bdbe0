import { InvalidArgumentError, type Command } from 'commander'

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
      const { startLocalSink } = await import('../relay/sink.js')
      const sink = await startLocalSink({ ...o, write: (text) => process.stdout.write(text) })
      process.stderr.write(
        `mailroom sink: listening on ${o.host}:${sink.port}; start mailroom with MAILROOM_SMARTHOST=${o.host}:${sink.port} (Ctrl-C stops)\n`,
      )
      const stop = () => void sink.close().then(() => process.exit(0))
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })
}
