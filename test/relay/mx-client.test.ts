import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { MxClient } from '../../relay/mx-client.js'
import { MAX_REPLY_LENGTH, MAX_REPLY_LINE, MAX_REPLY_LINES, toDataLines } from '../../relay/smtp-session.js'
import { loadTls } from '../../relay/tls.js'
import type { MxHost } from '../../relay/routes.js'
import { flood, startMuteMx, startSink } from './sink.js'

// Connections to an MX are kept open for the next transaction, which goes out at once (no RSET
// round trip first); a kept connection found dead is replaced without the message being deferred.
describe('MxClient: connection reuse', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup() {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 5_000 })
    cleanup.push(() => client.close())
    const hosts: MxHost[] = [{ name: 'mx.example.com', port: sink.port, addresses: ['127.0.0.1'] }]
    const deliver = (n: number, to = [`r${n}@example.com`]) =>
      client.deliver(hosts, { from: 's@example.org', to }, async () =>
        Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n`),
      )
    return { sink, deliver, hosts, client }
  }

  it('sends consecutive messages over one connection without an RSET before each', async () => {
    const { sink, deliver } = await setup()
    for (let n = 1; n <= 5; n++) {
      const attempt = await deliver(n)
      expect(attempt.replies.get(`r${n}@example.com`)).toMatchObject({ code: 250 })
      // Where it went, for the recipient's history: the sink offers no STARTTLS.
      expect(attempt).toMatchObject({ mxHostname: 'mx.example.com', mxAddress: '127.0.0.1', tls: false })
    }
    expect(sink.messages.map((m) => m.to)).toEqual([1, 2, 3, 4, 5].map((n) => [`r${n}@example.com`]))
    expect(sink.state.connections).toBe(1)
    expect(sink.state.rsets).toBe(0)
  })

  it('ends a refused transaction with RSET before the connection carries the next one', async () => {
    const { sink, deliver } = await setup()
    sink.state.rcptRule = (rcpt) => (rcpt.startsWith('gone') ? { code: 550, message: 'no such user' } : undefined)
    expect((await deliver(1, ['gone@example.com'])).replies.get('gone@example.com')).toMatchObject({ code: 550 })
    await expect.poll(() => sink.state.rsets).toBe(1)
    expect((await deliver(2)).replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.state.connections).toBe(1)
    expect(sink.messages.map((m) => m.to)).toEqual([['r2@example.com']])
  })

  it('answers 554 without sending when the body is gone from the queue, and keeps the connection', async () => {
    const { sink, deliver, hosts, client } = await setup()
    const attempt = await client.deliver(
      hosts,
      { from: 's@example.org', to: ['gone@example.com'] },
      async () => undefined,
    )
    expect(attempt.replies.get('gone@example.com')).toEqual({
      code: 554,
      response: '5.3.0 the message body is missing from the queue',
    })
    expect((await deliver(2)).replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.messages.map((m) => m.to)).toEqual([['r2@example.com']])
    expect(sink.state.connections).toBe(1)
  })

  it('reads the body once when a kept connection has to be replaced', async () => {
    const { sink, deliver, hosts, client } = await setup()
    await deliver(1)
    sink.dropConnections()
    let loads = 0
    const attempt = await client.deliver(
      hosts,
      { from: 's@example.org', to: ['r2@example.com'] },
      async () => (loads++, Buffer.from('Subject: m2\r\n\r\nbody 2\r\n')),
    )
    expect(attempt.replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(loads).toBe(1)
  })

  it('delivers at once over a new connection when the kept one died unnoticed', async () => {
    const { sink, deliver } = await setup()
    await deliver(1)
    // The server hangs up; the next delivery starts before the client has read the hang-up.
    sink.dropConnections()
    const attempt = await deliver(2)
    expect(attempt.replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.state.connections).toBe(2)
    expect(sink.messages.map((m) => m.to)).toEqual([['r1@example.com'], ['r2@example.com']])
  })
  it('sends the next transaction with the end of the message before it, without waiting for its reply', async () => {
    // An MX that answers the first message only once the next transaction's MAIL, RCPT and DATA
    // have arrived: a client that waits for that answer before it goes on never gets it.
    const seen: string[] = []
    const mx = createServer((socket) => {
      let input = ''
      let inData = false
      // Once the first message is in, replies wait (in order) until the next DATA has arrived.
      let held: string[] | null = null
      const reply = (text: string) => (held ? held.push(text) : socket.write(text))
      socket.write('220 mx.example.com ESMTP\r\n')
      socket.on('data', (chunk) => {
        input += chunk.toString('latin1')
        for (;;) {
          if (inData) {
            const end = input.indexOf('\r\n.\r\n')
            if (end < 0) return
            seen.push(`message: ${/^Subject: (.*)$/m.exec(input.slice(0, end))?.[1]}`)
            input = input.slice(end + 5)
            inData = false
            const first = seen.filter((l) => l.startsWith('message')).length === 1
            if (first) held = []
            reply(`250 2.0.0 ${first ? 'first' : 'second'} queued\r\n`)
            continue
          }
          const eol = input.indexOf('\r\n')
          if (eol < 0) return
          const line = input.slice(0, eol)
          input = input.slice(eol + 2)
          seen.push(line)
          if (/^EHLO/i.test(line)) reply('250-mx.example.com\r\n250 PIPELINING\r\n')
          else if (/^DATA/i.test(line)) {
            reply('354 go ahead\r\n')
            if (held) socket.write(held.join('')), (held = null)
            inData = true
          } else if (/^QUIT/i.test(line)) socket.end('221 bye\r\n')
          else reply('250 ok\r\n')
        }
      })
    })
    await new Promise<void>((resolve) => mx.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => new Promise((resolve) => mx.close(resolve)))
    const client = new MxClient({ heloName: 'test.example', timeout: 3_000 })
    cleanup.push(() => client.close())
    const hosts: MxHost[] = [
      { name: 'mx.example.com', port: (mx.address() as AddressInfo).port, addresses: ['127.0.0.1'] },
    ]
    const message = (n: number) => async () => Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n`)
    let second: ReturnType<MxClient['deliver']> | undefined
    const first = await client.deliver(hosts, { from: 's@example.org', to: ['r1@example.com'] }, message(1), () => {
      second = client.deliver(hosts, { from: 's@example.org', to: ['r2@example.com'] }, message(2))
    })
    expect(first.replies.get('r1@example.com')).toEqual({ code: 250, response: '250 2.0.0 first queued' })
    expect((await second!).replies.get('r2@example.com')).toEqual({ code: 250, response: '250 2.0.0 second queued' })
    expect(seen.filter((l) => !/^EHLO/.test(l))).toEqual([
      'MAIL FROM:<s@example.org>',
      'RCPT TO:<r1@example.com>',
      'DATA',
      'message: m1',
      'MAIL FROM:<s@example.org>',
      'RCPT TO:<r2@example.com>',
      'DATA',
      'message: m2',
    ])
  })
})

// A message counts as delivered only on the reply to its own end of data (RFC 5321 §4.1.1.4): the
// next transaction's commands leave with the dot, and their replies must not stand in for its own.
describe('MxClient: a destination that never answers the end of data', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it.each(['silent', 'lying'] as const)(
    'gives no message a reply (%s), the one whose MAIL went out with its dot included, then delivers once it behaves',
    async (mute) => {
      const mx = await startMuteMx()
      mx.state.mute = mute
      cleanup.push(() => mx.close())
      const client = new MxClient({ heloName: 'test.example', timeout: 2_000 })
      cleanup.push(() => client.close())
      const hosts: MxHost[] = [{ name: 'mx.example.com', port: mx.port, addresses: ['127.0.0.1'] }]
      const message = (n: number) => async () => Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n`)
      let second: ReturnType<MxClient['deliver']> | undefined
      const first = await client.deliver(hosts, { from: 's@example.org', to: ['r1@example.com'] }, message(1), () => {
        second = client.deliver(hosts, { from: 's@example.org', to: ['r2@example.com'] }, message(2))
      })
      expect(first.replies.get('r1@example.com')).toEqual({ code: null, response: 'no reply within 2000 ms' })
      expect((await second!).replies.get('r2@example.com')).toMatchObject({ code: null })
      // Both messages' data arrived (the second once more on a new connection): none was answered.
      expect(mx.state.dots).toBeGreaterThanOrEqual(2)
      mx.state.mute = false
      const retried = await client.deliver(hosts, { from: 's@example.org', to: ['r1@example.com'] }, message(1))
      expect(retried.replies.get('r1@example.com')).toEqual({ code: 250, response: '250 2.0.0 Ok: queued' })
      expect(mx.state.messages).toEqual([['r1@example.com']])
    },
  )

  it('takes no QUIT reply for the reply to a dot still unanswered when the idle connection is closed', async () => {
    const mx = await startMuteMx()
    cleanup.push(() => mx.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 60_000 })
    const hosts: MxHost[] = [{ name: 'mx.example.com', port: mx.port, addresses: ['127.0.0.1'] }]
    const attempt = client.deliver(hosts, { from: 's@example.org', to: ['r@example.com'] }, async () =>
      Buffer.from('Subject: m\r\n\r\nbody\r\n'),
    )
    await expect.poll(() => mx.state.dots).toBe(1)
    // The connection, parked once the message was out, is closed with QUIT: its 221 is QUIT's.
    client.close()
    expect((await attempt).replies.get('r@example.com')).toMatchObject({ code: null })
  })
})

describe('MxClient: the SMTP session', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup(options: Parameters<typeof startSink>[0] = {}) {
    const sink = await startSink(options)
    cleanup.push(() => sink.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 5_000 })
    cleanup.push(() => client.close())
    const hosts: MxHost[] = [{ name: 'localhost', port: sink.port, addresses: ['127.0.0.1'] }]
    const deliver = (to: string[], raw: Buffer | string = 'Subject: hi\r\n\r\nbody\r\n') =>
      client.deliver(hosts, { from: 's@example.org', to }, async () => Buffer.from(raw))
    return { sink, deliver }
  }

  it('upgrades to TLS when the MX offers STARTTLS, and keeps the TLS connection for the next message', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-mx-tls-'))
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
    const tls = await loadTls({
      smtp: loadConfig({ MAILROOM_DATA_DIR: dir }).smtp,
      dataDir: dir,
      nodeName: 'localhost',
    })
    const { sink, deliver } = await setup({ tls })
    for (const n of [1, 2]) {
      const attempt = await deliver([`r${n}@example.com`])
      expect(attempt.replies.get(`r${n}@example.com`)).toMatchObject({ code: 250 })
      expect(attempt).toMatchObject({ mxHostname: 'localhost', mxAddress: '127.0.0.1', tls: true })
    }
    expect(sink.messages.map((m) => [m.to, m.secure])).toEqual([
      [['r1@example.com'], true],
      [['r2@example.com'], true],
    ])
    expect(sink.state.connections).toBe(1)
  })

  it.each([
    ['with PIPELINING', false],
    ['without PIPELINING, one command at a time', true],
  ])('gives each recipient its own reply %s, and RSETs after a refusal', async (_label, hidePipelining) => {
    const { sink, deliver } = await setup({ hidePipelining })
    sink.state.rcptRule = (rcpt) => (rcpt.startsWith('gone') ? { code: 550, message: '5.1.1 no such user' } : undefined)
    const mixed = await deliver(['gone@example.com', 'here@example.com'])
    // A refusal at RCPT TO is marked as this recipient's own; the message's reply is not.
    expect(mixed.replies.get('gone@example.com')).toEqual({
      code: 550,
      response: '550 5.1.1 no such user',
      toRcpt: true,
    })
    expect(mixed.replies.get('here@example.com')).toMatchObject({
      code: 250,
      response: expect.stringMatching(/^250 2\.0\.0 Ok: queued as SINK1/),
    })
    // Every recipient refused: nothing is sent, and the transaction is ended before the next.
    const none = await deliver(['gone1@example.com', 'gone2@example.com'])
    expect([...none.replies.values()].map((r) => r.code)).toEqual([550, 550])
    await expect.poll(() => sink.state.rsets).toBe(1)
    // The message itself refused: its end also ended the transaction (RFC 5321 §4.1.1.4), so the
    // next one follows without an RSET.
    sink.state.dataRule = () => ({ code: 552, message: '5.3.4 too big for us' })
    expect((await deliver(['here@example.com'])).replies.get('here@example.com')).toEqual({
      code: 552,
      response: '552 5.3.4 too big for us',
    })
    sink.state.dataRule = undefined
    expect((await deliver(['here@example.com'])).replies.get('here@example.com')).toMatchObject({ code: 250 })
    expect(sink.state.rsets).toBe(1)
    expect(sink.messages.map((m) => m.to)).toEqual([['here@example.com'], ['here@example.com']])
    expect(sink.state.connections).toBe(1)
  })

  it('declares 8-bit content with BODY=8BITMIME to an MX that offers it, and sends it as it is to one that does not', async () => {
    const eightBit =
      'Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße\r\n'
    const offered = await setup()
    await offered.deliver(['a@example.com'], eightBit)
    await offered.deliver(['b@example.com'], 'Subject: ascii\r\n\r\nplain\r\n')
    expect(offered.sink.messages.map((m) => [m.to[0], m.body])).toEqual([
      ['a@example.com', '8bitmime'],
      ['b@example.com', '7bit'],
    ])
    const notOffered = await setup({ hide8BitMime: true })
    await notOffered.deliver(['c@example.com'], eightBit)
    expect(notOffered.sink.messages.map((m) => [m.body, m.raw.toString()])).toEqual([['7bit', eightBit]])
  })

  it('sends the message dot-stuffed with CRLF line ends: the MX gets it back line for line', async () => {
    const { sink, deliver } = await setup()
    const raw =
      'Subject: dots\r\n\r\n.starts with a dot\r\n..two dots\r\n.\r\nbare LF\nbare CR\r.after bare CR\r\nno final line break'
    expect((await deliver(['r@example.com'], raw)).replies.get('r@example.com')).toMatchObject({ code: 250 })
    expect(sink.messages[0].raw.toString()).toBe(
      'Subject: dots\r\n\r\n.starts with a dot\r\n..two dots\r\n.\r\nbare LF\r\nbare CR\r\n.after bare CR\r\nno final line break\r\n',
    )
  })

  it('reports a server that refuses to talk, and one that never answers, with its host', async () => {
    const refusing = createServer((socket) => socket.end('554-not here\r\n554 go away\r\n'))
    const silent = createServer(() => {})
    for (const s of [refusing, silent]) {
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
      cleanup.push(() => new Promise((r) => s.close(r)))
    }
    const client = new MxClient({ heloName: 'test.example', timeout: 300 })
    cleanup.push(() => client.close())
    const attempt = (server: Server) =>
      client.deliver(
        [{ name: 'mx.example.com', port: (server.address() as AddressInfo).port, addresses: ['127.0.0.1'] }],
        { from: 's@example.org', to: ['r@example.com'] },
        async () => Buffer.from('x\r\n'),
      )
    expect((await attempt(refusing)).replies.get('r@example.com')).toEqual({
      code: 554,
      response: expect.stringMatching(/^mx\.example\.com \[127\.0\.0\.1\]:\d+: 554-not here\n554 go away$/),
    })
    const timedOut = await attempt(silent)
    expect(timedOut.replies.get('r@example.com')).toEqual({
      code: null,
      response: expect.stringMatching(/^mx\.example\.com \[127\.0\.0\.1\]:\d+: connection timed out after 300 ms$/),
    })
    // No session was set up: the attempt had no connection to name, encrypted or not.
    expect(timedOut).toMatchObject({ mxHostname: 'mx.example.com', mxAddress: null, tls: null })
  })
})

/**
 * A server that answers each command line with the reply `answer` gives (none: stay silent), and
 * records what it was sent. In DATA it answers the message once its terminating dot arrives.
 */
async function scriptedServer(answer: (line: string) => string | undefined) {
  const lines: string[] = []
  const server = createServer((socket) => {
    let buffer = ''
    let inData = false
    socket.write('220 scripted.example ESMTP\r\n')
    socket.on('data', (d: Buffer) => {
      buffer += d.toString('latin1')
      let i: number
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i)
        buffer = buffer.slice(i + 2)
        lines.push(line)
        if (inData) {
          if (line === '.') (inData = false), socket.write('250 2.0.0 stored\r\n')
          continue
        }
        const reply = answer(line)
        if (reply?.startsWith('354')) inData = true
        if (reply) socket.write(`${reply}\r\n`)
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  const host: MxHost = {
    name: 'scripted.example',
    port: (server.address() as AddressInfo).port,
    addresses: ['127.0.0.1'],
  }
  return { server, host, lines, close: () => new Promise((r) => server.close(r)) }
}

describe('MxClient: servers of another kind', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it('says HELO to a server that refuses EHLO, and then sends one command at a time', async () => {
    const s = await scriptedServer((line) =>
      line.startsWith('EHLO') ? '502 5.5.2 EHLO not implemented' : line === 'DATA' ? '354 go on' : '250 ok',
    )
    cleanup.push(() => s.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 5_000 })
    cleanup.push(() => client.close())
    const attempt = await client.deliver(
      [s.host],
      { from: 's@example.org', to: ['a@example.com', 'b@example.com'] },
      async () => Buffer.from('Subject: hi\r\n\r\nbody\r\n'),
    )
    expect([...attempt.replies.values()]).toEqual([
      { code: 250, response: '250 2.0.0 stored' },
      { code: 250, response: '250 2.0.0 stored' },
    ])
    expect(s.lines.slice(0, 7)).toEqual([
      'EHLO test.example',
      'HELO test.example',
      'MAIL FROM:<s@example.org>',
      'RCPT TO:<a@example.com>',
      'RCPT TO:<b@example.com>',
      'DATA',
      'Subject: hi',
    ])
  })

  it('gives every recipient no reply (code null) when the server stops answering mid-transaction, and does not reuse it', async () => {
    const s = await scriptedServer((line) =>
      line.startsWith('EHLO')
        ? '250-scripted.example\r\n250 PIPELINING'
        : line.startsWith('MAIL')
          ? undefined
          : '250 ok',
    )
    cleanup.push(() => s.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 300 })
    cleanup.push(() => client.close())
    const deliver = () =>
      client.deliver([s.host], { from: 's@example.org', to: ['a@example.com'] }, async () => Buffer.from('x\r\n'))
    expect((await deliver()).replies.get('a@example.com')).toEqual({ code: null, response: 'no reply within 300 ms' })
    await deliver()
    expect(s.lines.filter((l) => l.startsWith('EHLO'))).toHaveLength(2)
  })
})

describe('toDataLines', () => {
  it.each([
    ['a clean message, as it is', 'a\r\nb\r\n', 'a\r\nb\r\n.\r\n'],
    ['a dot at the start of a line, doubled', '.a\r\n.\r\nb.c\r\n', '..a\r\n..\r\nb.c\r\n.\r\n'],
    ['bare LF, made CRLF', 'a\nb\n', 'a\r\nb\r\n.\r\n'],
    ['bare CR, made CRLF, and a dot after it doubled', 'a\r.b\rc\r\n', 'a\r\n..b\r\nc\r\n.\r\n'],
    ['no final line break, one added', 'a\r\nb', 'a\r\nb\r\n.\r\n'],
    ['a final bare CR, completed', 'a\r', 'a\r\n.\r\n'],
    ['an empty message, only the dot', '', '.\r\n'],
  ])('%s', (_label, input, output) => {
    expect(Buffer.concat(toDataLines(Buffer.from(input))).toString()).toBe(output)
  })
})

// A destination is an outside party: whatever it sends, the client holds a bounded amount of it
// and gives up on a reply that runs on, as a temporary failure that says why.
describe('MxClient: hostile servers', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  /** One attempt toward a server that treats each connection with `handle`. */
  async function attemptAgainst(handle: (socket: Socket) => void, timeout = 5_000) {
    const server = createServer((socket) => {
      // The client hangs up on a hostile server mid-write: the reset is expected, not an error.
      socket.on('error', () => {})
      handle(socket)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
    cleanup.push(() => new Promise((r) => server.close(r)))
    const client = new MxClient({ heloName: 'test.example', timeout })
    cleanup.push(() => client.close())
    const host: MxHost = {
      name: 'evil.example',
      port: (server.address() as AddressInfo).port,
      addresses: ['127.0.0.1'],
    }
    const attempt = await client.deliver([host], { from: 's@example.org', to: ['r@example.com'] }, async () =>
      Buffer.from('Subject: hi\r\n\r\nbody\r\n'),
    )
    return attempt.replies.get('r@example.com')!
  }
  // Each flood is 20 MB at most, so that a client without bounds would hold it all and then time out.
  const MB20 = 20 * 1024 * 1024
  const greetThenEhlo = (socket: Socket, answerEhlo: () => void) => {
    socket.write('220 evil.example ESMTP\r\n')
    socket.once('data', answerEhlo)
  }

  it.each([
    [
      'an endless multi-line EHLO reply',
      (s: Socket) => flood(s, `250-${'x'.repeat(60)}\r\n`, MB20),
      `${MAX_REPLY_LINES} lines`,
    ],
    [
      'an EHLO reply line without end',
      (s: Socket) => flood(s, `250-${'x'.repeat(8192)}`, MB20),
      `${MAX_REPLY_LENGTH} bytes`,
    ],
    [
      'a 10 MB reply line',
      (s: Socket) => flood(s, `250 ${'x'.repeat(10 * 1024 * 1024)}\r\n`, 10 * 1024 * 1024 + 6),
      `${MAX_REPLY_LENGTH} bytes`,
    ],
  ])('drops the connection on %s, and the attempt is a temporary failure saying why', async (_label, reply, bound) => {
    const got = await attemptAgainst((socket) => greetThenEhlo(socket, () => reply(socket)))
    expect(got).toEqual({
      code: null,
      response: expect.stringMatching(
        new RegExp(
          `^evil\\.example \\[127\\.0\\.0\\.1\\]:\\d+: the server's reply ran past ${bound}; connection dropped$`,
        ),
      ),
    })
  })

  it('keeps the first 1000 characters of a long reply line and reads the reply to its end', async () => {
    const got = await attemptAgainst((socket) => {
      socket.write('220 evil.example ESMTP\r\n')
      socket.on('data', (d: Buffer) => {
        const line = d.toString()
        if (line.startsWith('EHLO')) socket.write('250 evil.example\r\n')
        else if (line.startsWith('MAIL')) socket.write(`550-5.7.1 ${'y'.repeat(5000)}\r\n550 5.7.1 refused\r\n`)
        else socket.end('221 bye\r\n')
      })
    })
    expect(got.code).toBe(550)
    expect(got.response).toBe(`550-5.7.1 ${'y'.repeat(MAX_REPLY_LINE - 10)} [cut]\n550 5.7.1 refused`)
  })

  it('drops the connection when a reply trickles in for longer than the timeout', async () => {
    const got = await attemptAgainst((socket) => {
      socket.write('220 evil.example ESMTP\r\n')
      socket.on('data', (d: Buffer) => {
        if (d.toString().startsWith('EHLO')) return void socket.write('250 evil.example\r\n')
        // A byte every 100 ms keeps the connection from ever being idle, and the reply from ending.
        const drip = setInterval(() => socket.write('2'), 100)
        socket.on('close', () => clearInterval(drip))
      })
    }, 600)
    expect(got).toEqual({ code: null, response: "the server's reply did not end within 600 ms; connection dropped" })
  })

  it('drops the connection when the server sends replies no command asked for', async () => {
    // In 8 KB writes: one write per 8-byte line would keep this process's event loop (the client's
    // too) busy for seconds before the client reads a byte.
    const got = await attemptAgainst((socket) =>
      greetThenEhlo(socket, () => flood(socket, '250 ok\r\n'.repeat(1024), MB20)),
    )
    expect(got).toEqual({ code: null, response: 'the server sent a reply no command asked for; connection dropped' })
  })
})
