import { createServer, type AddressInfo, type Socket } from 'node:net'
import { SMTPServer, type SMTPServerSession } from 'smtp-server'
import type { MxResolver } from '../../relay/routes.js'

export interface SunkMessage {
  from: string
  to: string[]
  raw: Buffer
  secure: boolean
  /** MAIL FROM's BODY parameter (RFC 6152), lower case: '8bitmime', or '7bit' when not given. */
  body: string | undefined
}

/** How the sink answers a recipient (or the message); undefined = accept. */
export type SinkRule = (rcpt: string) => { code: number; message: string } | undefined

/**
 * A real SMTP server on 127.0.0.1, port 0, standing in for a destination MX. It records every
 * accepted message; `rcptRule` and `dataRule` make it refuse, and `dropDuringData` makes it
 * hang up in the middle of DATA. `connections` and `rsets` count what clients did.
 */
export async function startSink(
  options: {
    tls?: { key: string | Buffer; cert: string | Buffer }
    hidePipelining?: boolean
    hide8BitMime?: boolean
  } = {},
) {
  const messages: SunkMessage[] = []
  const state = {
    /** How the sink answers MAIL FROM (given the sender); undefined = accept. */
    mailRule: undefined as SinkRule | undefined,
    rcptRule: undefined as SinkRule | undefined,
    /** How the sink answers a message's data (given its bytes); undefined = accept. */
    dataRule: undefined as ((raw: Buffer) => { code: number; message: string } | undefined) | undefined,
    dropDuringData: false,
    /** While set, the reply to each message waits for it (a slow destination). */
    hold: undefined as Promise<void> | undefined,
    /** Messages whose data has fully arrived, answered or not. */
    received: 0,
    connections: 0,
    rsets: 0,
  }
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    logger: false,
    // The relay keeps connections open for reuse: do not wait for them on close.
    closeTimeout: 100,
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : { hideSTARTTLS: true }),
    hidePIPELINING: options.hidePipelining ?? false,
    hide8BITMIME: options.hide8BitMime ?? false,
    onConnect(_session, cb) {
      state.connections++
      cb()
    },
    onMailFrom(address, _session, cb) {
      const r = state.mailRule?.(address.address)
      cb(r ? Object.assign(new Error(r.message), { responseCode: r.code }) : undefined)
    },
    onRcptTo(address, _session, cb) {
      const r = state.rcptRule?.(address.address)
      cb(r ? Object.assign(new Error(r.message), { responseCode: r.code }) : undefined)
    },
    onData(stream, session: SMTPServerSession, cb) {
      const chunks: Buffer[] = []
      let dropped = false
      stream.on('data', (c: Buffer) => {
        chunks.push(c)
        if (state.dropDuringData) {
          dropped = true
          for (const socket of sockets) socket.destroy()
        }
      })
      stream.on('end', async () => {
        if (dropped) return
        state.received++
        await state.hold
        const r = state.dataRule?.(Buffer.concat(chunks))
        if (r) return cb(Object.assign(new Error(r.message), { responseCode: r.code }))
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((a) => a.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          body: (session.envelope as { bodyType?: string }).bodyType,
        })
        cb(null, `2.0.0 Ok: queued as SINK${messages.length}`)
      })
    },
  })
  // Drop-during-DATA is simulated by destroying the sockets; the server's handlers must not crash.
  const sockets = new Set<Socket>()
  server.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    // Commands are counted off the wire (smtp-server has no hook for RSET).
    socket.on('data', (d: Buffer) => (state.rsets += (d.toString('latin1').match(/^RSET\r?$/gim) ?? []).length))
  })
  server.on('error', () => {})
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const port = (server.server.address() as AddressInfo).port
  return {
    port,
    messages,
    state,
    /** Hangs up every open connection without a word, as a server that restarted would. */
    dropConnections: () => {
      for (const s of sockets) s.destroy()
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** A resolver stub: MX records and addresses of test domains, NXDOMAIN for everything else. */
export function stubResolver(zone: {
  mx?: Record<string, { exchange: string; priority: number }[]>
  a?: Record<string, string[]>
}): MxResolver {
  const nx = (name: string) => Object.assign(new Error(`queryMx ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
  return {
    resolveMx: async (d) => {
      if (zone.mx?.[d]) return zone.mx[d]
      throw nx(d)
    },
    resolve4: async (h) => {
      if (zone.a?.[h]) return zone.a[h]
      throw nx(h)
    },
    resolve6: async (h) => {
      throw Object.assign(new Error(`queryAaaa ENODATA ${h}`), { code: zone.a?.[h] ? 'ENODATA' : 'ENOTFOUND' })
    },
  }
}

/** Writes `chunk` to the socket as fast as the client reads it, until `total` characters are out or the client hangs up. */
export function flood(socket: Socket, chunk: string, total = Infinity): void {
  let sent = 0
  const pump = () => {
    while (!socket.destroyed && sent < total) {
      sent += chunk.length
      if (!socket.write(chunk)) return void socket.once('drain', pump)
    }
  }
  socket.on('error', () => {})
  pump()
}

/**
 * A destination that takes a message's whole DATA and then gives its dot no reply while
 * `state.mute` is set: 'silent' answers nothing more for it, 'lying' answers the next MAIL with
 * a dot's "250 queued" (one reply where two are owed). Every other command gets its usual reply,
 * PIPELINING is offered; once `mute` is cleared it behaves and records what it takes.
 */
export async function startMuteMx() {
  const state = { mute: 'silent' as 'silent' | 'lying' | false, dots: 0, messages: [] as string[][] }
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let input = ''
    let inData = false
    let to: string[] = []
    let owed = false
    socket.write('220 mute.example ESMTP\r\n')
    socket.on('data', (chunk: Buffer) => {
      input += chunk.toString('latin1')
      for (;;) {
        if (inData) {
          const end = input.indexOf('\r\n.\r\n')
          if (end < 0) return
          input = input.slice(end + 5)
          inData = false
          state.dots++
          if (state.mute) owed = state.mute === 'lying'
          else state.messages.push(to), socket.write('250 2.0.0 Ok: queued\r\n')
          continue
        }
        const eol = input.indexOf('\r\n')
        if (eol < 0) return
        const line = input.slice(0, eol)
        input = input.slice(eol + 2)
        if (/^EHLO/i.test(line)) socket.write('250-mute.example\r\n250 PIPELINING\r\n')
        else if (/^MAIL/i.test(line)) {
          to = []
          socket.write(owed ? '250 2.0.0 Ok: queued\r\n' : '250 2.1.0 Ok\r\n')
          owed = false
        } else if (/^RCPT TO:<(.*)>/i.test(line)) to.push(/<(.*)>/.exec(line)![1]), socket.write('250 2.1.5 Ok\r\n')
        else if (/^DATA/i.test(line)) (inData = true), socket.write('354 go ahead\r\n')
        else if (/^QUIT/i.test(line)) socket.end('221 2.0.0 bye\r\n')
        else socket.write('250 2.0.0 Ok\r\n')
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    state,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}
