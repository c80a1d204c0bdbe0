import { pino, type Logger } from 'pino'
import type { Config } from './config.js'

/** Where formatted log lines are written. */
export interface LogStream {
  write(lines: string): void
}

/**
 * The process's log output: stderr when stdout is reserved (stdio MCP, --json output), one
 * synchronous write per line; else stdout, in batches of 4 KB or what 100 ms brought, and what is
 * left at exit. (Writing each line as soon as the write before it was done took about 5% of the
 * main thread under the load of a send benchmark: a write, and the thread-pool round trip, per
 * line or two.) `mailroom serve` keeps this stream to write the engine thread's lines through it,
 * so that stdout has one writer and lines stay whole.
 */
export function logStream(fd: 1 | 2) {
  return pino.destination(
    fd === 2 ? { fd: 2, sync: true } : { fd: 1, sync: false, minLength: 4096, periodicFlush: 100 },
  )
}

/** A logger writing to stdout (1), stderr (2) or a stream given (see logStream). */
export function createLogger(config: Pick<Config, 'logLevel'>, destination: 1 | 2 | LogStream = 1): Logger {
  const stream = typeof destination === 'number' ? logStream(destination) : destination
  return pino({ level: config.logLevel, base: { pid: process.pid } }, stream)
}
