import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import nodemailer from 'nodemailer'
import type { SMTPServer } from 'smtp-server'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { createByteBudget } from '../../relay/byte-budget.js'
import { storeChecked, withAuthResults } from '../../relay/inbound/intake.js'
import { createMxServer, type MxDeps } from '../../relay/inbound/mx.js'
import type { MxRefusalReason } from '../../relay/refusal.js'
import { authResolver, inboundIntake } from '../../relay/inbound/verify.js'
import type { InboundRecipient, NewInboundMessage, Store } from '../../storage/store.js'
import { loadTls } from '../../relay/tls.js'
import { silentLogger } from '../helpers.js'
import { DNSMASQ, describeWith } from '../system/peers.js'
import { senderMessage, startSenderDns } from './inbound-support.js'
import { RawSmtp, refusal, SmtpClient } from './submission-client.js'

const execFileAsync = promisify(execFile)

/**
 * The store's half, as small as it can be: acme.test receives for two inboxes of account 1 (one
 * of them full), other.test is catch-all for account 2, and every other domain is no one's.
 */
type InboundReceiver = Pick<Store['inbound'], 'recipient' | 'receive'>

function fakeInbound() {
  const received: NewInboundMessage[] = []
  const asked: { address: string; quota: number }[] = []
  const inbound: InboundReceiver & { received: NewInboundMessage[]; asked: typeof asked } = {
    received,
    asked,
    async recipient(address, quota): Promise<InboundRecipient> {
      asked.push({ address, quota })
      const domain = address.slice(address.lastIndexOf('@') + 1)
      if (address === 'quotes@acme.test' || address === 'help@acme.test') return { kind: 'inbox', accountId: 1 }
      if (address === 'full@acme.test') return { kind: 'full', accountId: 1 }
      if (domain === 'acme.test') return { kind: 'unknown' }
      if (domain === 'other.test') return { kind: 'inbox', accountId: 2 }
      return { kind: 'not-receiving' }
    },
    async receive(message) {
      received.push(message)
      return message.recipients.map((_, i) => ({ id: `in_${received.length}_${i}`, inboxId: i + 1, threadId: 'th_1' }))
    },
  }
  return inbound
}

describeWith('the MX door', 'dnsmasq and swaks', existsSync(DNSMASQ) ? undefined : `${DNSMASQ} is missing`, () => {
  let dataDir: string
  let tls: { key: Buffer; cert: Buffer }
  let dns: Awaited<ReturnType<typeof startSenderDns>>
  let server: SMTPServer | undefined
  const clients: { close(): void }[] = []

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'mailroom-mx-'))
    tls = await loadTls({ smtp: loadConfig({ MAILROOM_DATA_DIR: dataDir }).smtp, dataDir, nodeName: 'localhost' })
    dns = await startSenderDns()
  })
  afterAll(async () => {
    dns?.stop()
    await rm(dataDir, { recursive: true, force: true })
  })
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close()
    const s = server
    server = undefined
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()))
  })

  /** The door on 127.0.0.1, an ephemeral port, over `inbound`. */
  async function start(
    inbound: InboundReceiver = fakeInbound(),
    env: Record<string, string> = {},
    metrics?: MxDeps['metrics'],
  ) {
    const config = loadConfig({ MAILROOM_DATA_DIR: dataDir, ...env })
    const s = (server = createMxServer({
      inbound,
      intake: inboundIntake(
        { resolver: authResolver([dns.server]), hostname: 'mx.acme.test', logger: silentLogger },
        storeChecked({
          receive: (message) => inbound.receive(message),
          hostname: 'mx.acme.test',
          clock: () => 1_800_000_000_000,
          logger: silentLogger,
        }),
      ),
      config,
      hostname: 'mx.acme.test',
      quota: 5_000_000,
      logger: silentLogger,
      tls,
      budget: createByteBudget(config.memoryBudget),
      metrics,
    }))
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()))
    return (s.server.address() as AddressInfo).port
  }

  /** nodemailer's transport, from `localAddress` (any of 127.0.0.0/8 reaches the door). */
  const nodemailerTo = (port: number, localAddress = '127.0.0.1') =>
    nodemailer.createTransport({
      host: '127.0.0.1',
      port,
      localAddress,
      name: 'mail.sender.test',
      requireTLS: true,
      tls: { rejectUnauthorized: false },
    })

  it('takes a signed message for an inbox over STARTTLS, and hands it over with its verdict', async () => {
    const inbound = fakeInbound()
    const port = await start(inbound)
    const raw = await dns.signed(senderMessage())
    const info = await nodemailerTo(port).sendMail({
      envelope: { from: 'boss@sender.test', to: ['Quotes@acme.test'] },
      raw,
    })
    expect(info.response).toBe('250 2.0.0 Message received as in_1_0')
    expect(inbound.asked).toEqual([{ address: 'quotes@acme.test', quota: 5_000_000 }])
    expect(inbound.received).toHaveLength(1)
    const [got] = inbound.received
    expect(got).toMatchObject({
      accountId: 1,
      recipients: ['quotes@acme.test'],
      mailFrom: 'boss@sender.test',
      remoteAddress: '127.0.0.1',
      receivedAt: 1_800_000_000_000,
      parsed: {
        subject: 'the quote',
        from: { address: 'boss@sender.test', name: 'Boss' },
        messageId: 'q1@sender.test',
      },
      auth: {
        spf: { result: 'pass', domain: 'sender.test' },
        dkim: [{ result: 'pass', domain: 'sender.test', selector: 's1' }],
        dmarc: { result: 'pass', policy: 'reject', domain: 'sender.test' },
      },
    })
    const stored = Buffer.concat(got.raw).toString()
    expect(stored.startsWith(`Authentication-Results: ${got.auth.header}\r\n`)).toBe(true)
    expect(got.auth.header).toMatch(/^mx\.acme\.test;[\s\S]*dkim=pass[\s\S]*spf=pass[\s\S]*dmarc=pass/)
    expect(stored.endsWith(raw)).toBe(true)
  })

  it('keeps a large message byte for byte, dots included, with or without TLS, and the next one on the connection', async () => {
    // 3 MB in lines of 76, a tenth of them starting with a dot (sent doubled, RFC 5321 §4.5.2):
    // the chunks are kept as they arrive, so a seam between reads or a dot must not cost a byte.
    const lines = Array.from({ length: 40_000 }, (_, i) => `${i % 10 === 0 ? '.' : ''}${String(i).padStart(75, 'x')}`)
    const raws = await Promise.all([
      dns.signed(senderMessage('boss@sender.test', 'big', lines.join('\r\n'))),
      dns.signed(senderMessage('boss@sender.test', 'after', '.\r\n..\r\nend')),
    ])
    for (const secure of [false, true]) {
      const inbound = fakeInbound()
      const port = await start(inbound)
      const transport = nodemailer.createTransport({
        host: '127.0.0.1',
        port,
        name: 'mail.sender.test',
        ignoreTLS: !secure,
        requireTLS: secure,
        tls: { rejectUnauthorized: false },
        pool: true,
        maxConnections: 1,
      })
      for (const raw of raws)
        await transport.sendMail({ envelope: { from: 'boss@sender.test', to: ['quotes@acme.test'] }, raw })
      transport.close()
      expect(inbound.received.map((m) => [m.parsed.subject, m.auth.dkim[0]?.result])).toEqual([
        ['big', 'pass'],
        ['after', 'pass'],
      ])
      for (const [i, raw] of raws.entries()) {
        const stored = Buffer.concat(inbound.received[i].raw)
        const top = Buffer.byteLength(`Authentication-Results: ${inbound.received[i].auth.header}\r\n`)
        expect(stored.subarray(top).equals(Buffer.from(raw))).toBe(true)
      }
      await new Promise<void>((resolve) => server?.close(() => resolve()))
      server = undefined
    }
  })

  it('offers STARTTLS and no AUTH, and upgrades', async () => {
    const port = await start()
    const raw = await RawSmtp.open(port)
    clients.push(raw)
    expect(await raw.greeting).toMatch(/^220 mx\.acme\.test ESMTP mailroom MX/)
    const ehlo = await raw.cmd('EHLO mail.sender.test')
    expect(ehlo).toMatch(/STARTTLS/)
    expect(ehlo).not.toMatch(/AUTH/)
    expect(await raw.starttls()).toMatch(/^220/)
    expect(await raw.cmd('EHLO mail.sender.test')).not.toMatch(/STARTTLS/)
    expect(await raw.cmd('AUTH PLAIN AGFAYg==')).toMatch(/^50[0-3]/)
  })

  it('takes a message swaks sends, and records SPF for the connecting address', async () => {
    const inbound = fakeInbound()
    const port = await start(inbound)
    const { stdout } = await execFileAsync('swaks', [
      '--server',
      `127.0.0.1:${port}`,
      '--helo',
      'mail.sender.test',
      '--from',
      'boss@sender.test',
      '--to',
      'help@acme.test',
      '--header',
      'From: boss@sender.test',
      '--header',
      'Subject: from swaks',
      '--body',
      'Hello from swaks',
    ])
    expect(stdout).toMatch(/<- +250 2\.0\.0 Message received as in_1_0/)
    expect(inbound.received).toHaveLength(1)
    expect(inbound.received[0]).toMatchObject({
      recipients: ['help@acme.test'],
      parsed: { subject: 'from swaks', extractedText: 'Hello from swaks' },
      auth: { spf: { result: 'pass' }, dkim: [], dmarc: { result: 'pass' } },
    })
  })

  it('records an SPF failure when the sender connects from an address its domain does not name', async () => {
    const inbound = fakeInbound()
    const port = await start(inbound)
    await nodemailerTo(port, '127.0.0.9').sendMail({
      envelope: { from: 'boss@sender.test', to: ['quotes@acme.test'] },
      raw: await dns.signed(senderMessage()),
    })
    // Signed and aligned, the message passes DMARC all the same: it is taken.
    expect(inbound.received[0].auth).toMatchObject({
      spf: { result: 'fail', domain: 'sender.test' },
      dkim: [{ result: 'pass' }],
      dmarc: { result: 'pass' },
    })
    expect(inbound.received[0].auth.header).toMatch(/spf=fail/)
  })

  it('records a DKIM failure for a message altered after it was signed', async () => {
    const inbound = fakeInbound()
    const port = await start(inbound)
    const forged = (await dns.signed(senderMessage())).replace('Please send the quote.', 'Please pay invoice 42.')
    await nodemailerTo(port).sendMail({ envelope: { from: 'boss@sender.test', to: ['quotes@acme.test'] }, raw: forged })
    expect(inbound.received).toHaveLength(1)
    expect(inbound.received[0].auth.dkim).toHaveLength(1)
    expect(inbound.received[0].auth.dkim[0]).toMatchObject({ domain: 'sender.test', selector: 's1' })
    expect(inbound.received[0].auth.dkim[0].result).not.toBe('pass')
    expect(inbound.received[0].auth.header).not.toMatch(/dkim=pass/)
  })

  it('refuses an unknown inbox at RCPT with 550 5.1.1, and stores nothing', async () => {
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound))
    clients.push(client)
    const err = await refusal(client.send({ from: 'boss@sender.test', to: ['nobody@acme.test'] }, senderMessage()))
    expect(err.responseCode).toBe(550)
    expect(err.response).toBe('550 5.1.1 No such mailbox: nobody@acme.test')
    expect(inbound.received).toEqual([])
  })

  it('refuses a domain no account receives for: never an open relay', async () => {
    const inbound = fakeInbound()
    const port = await start(inbound)
    // The classic relay test: a stranger sends to a stranger through this MX.
    const { stdout } = await execFileAsync(
      'swaks',
      ['--server', `127.0.0.1:${port}`, '--from', 'spammer@elsewhere.test', '--to', 'victim@faraway.test'],
      { encoding: 'utf8' },
    ).catch((err: { stdout: string }) => ({ stdout: err.stdout }))
    expect(stdout).toMatch(/<\*\* +550 5\.7\.1 victim@faraway\.test: relay not permitted/)
    expect(stdout).not.toMatch(/<- +354/)
    // nodemailer too, with the recipient's domain only looking like ours.
    const client = await SmtpClient.open(port)
    clients.push(client)
    const err = await refusal(
      client.send({ from: 'boss@sender.test', to: ['quotes@acme.test.faraway.test'] }, senderMessage()),
    )
    expect(err.response).toBe('550 5.7.1 quotes@acme.test.faraway.test: relay not permitted')
    expect(inbound.received).toEqual([])
  })

  it('takes a message for the inboxes among its recipients only, grouped by account', async () => {
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound))
    clients.push(client)
    const info = await client.send(
      {
        from: 'boss@sender.test',
        to: ['quotes@acme.test', 'nobody@acme.test', 'help@acme.test', 'anyone@other.test', 'x@faraway.test'],
      },
      await dns.signed(senderMessage()),
    )
    expect(info.accepted).toEqual(['quotes@acme.test', 'help@acme.test', 'anyone@other.test'])
    expect(inbound.received.map((m) => [m.accountId, m.recipients])).toEqual([
      [1, ['quotes@acme.test', 'help@acme.test']],
      [2, ['anyone@other.test']],
    ])
    // The receiver may take the pieces' memory over: each account gets pieces of its own.
    const [one, two] = inbound.received.map((m) => m.raw)
    expect(Buffer.concat(one)).toEqual(Buffer.concat(two))
    expect(one.some((piece) => two.includes(piece))).toBe(false)
  })

  it('answers a full inbox 452 4.2.2', async () => {
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound))
    clients.push(client)
    const err = await refusal(client.send({ from: 'boss@sender.test', to: ['full@acme.test'] }, senderMessage()))
    expect(err.response).toBe('452 4.2.2 Mailbox full@acme.test is full; try again later')
    expect(inbound.received).toEqual([])
  })

  it('refuses at DATA a message whose From domain publishes p=reject and that fails DMARC, and stores nothing', async () => {
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound))
    clients.push(client)
    // Unsigned, From the domain, from an envelope sender of another: nothing aligns.
    const err = await refusal(
      client.send({ from: 'someone@elsewhere.test', to: ['quotes@acme.test'] }, senderMessage()),
    )
    expect(err.responseCode).toBe(550)
    expect(err.response).toMatch(
      /^550 5\.7\.1 Message refused: the DMARC policy of sender\.test is reject, and it failed DMARC \(SPF none for elsewhere\.test, DKIM none\)$/,
    )
    expect(inbound.received).toEqual([])
  })

  it('counts each message received, and each refusal under its reason', async () => {
    const counted: (MxRefusalReason | 'received')[] = []
    const metrics = { received: () => counted.push('received'), mxRefused: (r: MxRefusalReason) => counted.push(r) }
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound, {}, metrics))
    clients.push(client)
    const info = await client.send(
      { from: 'boss@sender.test', to: ['quotes@acme.test', 'full@acme.test', 'nobody@acme.test', 'x@faraway.test'] },
      await dns.signed(senderMessage()),
    )
    expect(info.accepted).toEqual(['quotes@acme.test'])
    await refusal(client.send({ from: 'someone@elsewhere.test', to: ['quotes@acme.test'] }, senderMessage()))
    expect(counted).toEqual(['mailbox_full', 'no_such_mailbox', 'relay_denied', 'received', 'dmarc_reject'])
    expect(inbound.received).toHaveLength(1)
  })

  it('answers 250 only once the store has committed the message', async () => {
    const inbound = fakeInbound()
    let commit!: () => void
    const committed = new Promise<void>((resolve) => (commit = resolve))
    const receive = inbound.receive
    inbound.receive = async (message) => {
      await committed
      return receive(message)
    }
    let calls = 0
    const counting: InboundReceiver = {
      recipient: inbound.recipient,
      receive: (m) => {
        calls++
        return inbound.receive(m)
      },
    }
    const port = await start(counting)
    const client = await SmtpClient.open(port)
    clients.push(client)
    let answered = false
    const sent = client
      .send({ from: 'boss@sender.test', to: ['quotes@acme.test'] }, await dns.signed(senderMessage()))
      .finally(() => (answered = true))
    await expect.poll(() => calls).toBe(1)
    // The client has sent its dot and the store has not committed. A round trip on another
    // connection lets any reply already written to the first one arrive: none has.
    const probe = await RawSmtp.open(port)
    clients.push(probe)
    await probe.greeting
    expect(await probe.cmd('NOOP')).toMatch(/^250/)
    expect(answered).toBe(false)
    commit()
    expect((await sent).response).toMatch(/^250 2\.0\.0 Message received as in_1_0$/)
  })

  it('answers 451 when the store fails, and acknowledges nothing', async () => {
    const inbound = fakeInbound()
    inbound.receive = async () => {
      throw new Error('database is locked')
    }
    const client = await SmtpClient.open(await start(inbound))
    clients.push(client)
    const err = await refusal(
      client.send({ from: 'boss@sender.test', to: ['quotes@acme.test'] }, await dns.signed(senderMessage())),
    )
    expect(err.response).toBe('451 4.3.0 The message could not be stored; try again later')
    expect(inbound.received).toEqual([])
  })

  it('refuses a message past MAILROOM_MAX_MESSAGE_SIZE with 552 5.3.4, and stores nothing', async () => {
    const inbound = fakeInbound()
    const client = await SmtpClient.open(await start(inbound, { MAILROOM_MAX_MESSAGE_SIZE: '4kb' }))
    clients.push(client)
    const big = senderMessage('boss@sender.test', 'big', 'x'.repeat(70).concat('\r\n').repeat(100))
    const err = await refusal(client.send({ from: 'boss@sender.test', to: ['quotes@acme.test'] }, big))
    expect(err.response).toBe('552 5.3.4 Message exceeds the maximum size of 4096 bytes')
    expect(inbound.received).toEqual([])
  })

  it('refuses a connection past MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS with 421', async () => {
    const port = await start(fakeInbound(), { MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS: '2' })
    const open = [await RawSmtp.open(port), await RawSmtp.open(port)]
    clients.push(...open)
    for (const c of open) expect(await c.greeting).toMatch(/^220/)
    const third = await RawSmtp.open(port)
    clients.push(third)
    expect(await third.greeting).toBe('421 4.7.0 Too many connections from 127.0.0.1; try again later')
    // Another address has its own share.
    const other = await RawSmtp.open(port, '127.0.0.1', '127.0.0.2')
    clients.push(other)
    expect(await other.greeting).toMatch(/^220/)
  })

  it('cuts off a client that keeps trying addresses that are no inbox', async () => {
    const port = await start(fakeInbound(), { MAILROOM_MAX_RECIPIENTS: '3' })
    const raw = await RawSmtp.open(port)
    clients.push(raw)
    await raw.greeting
    await raw.cmd('EHLO harvest.test')
    expect(await raw.cmd('MAIL FROM:<h@harvest.test>')).toMatch(/^250/)
    for (const name of ['a', 'b', 'c']) expect(await raw.cmd(`RCPT TO:<${name}@acme.test>`)).toMatch(/^550 5\.1\.1/)
    expect(await raw.cmd('RCPT TO:<d@acme.test>')).toMatch(/^421 4\.7\.0 3 recipients refused/)
  })

  it('renames an Authentication-Results in its own name that the message brought', () => {
    const forged = Buffer.from('Authentication-Results: mx.acme.test; dkim=pass\r\nSubject: hi\r\n\r\nbody\r\n')
    const stored = Buffer.concat(withAuthResults(forged, 'mx.acme.test; dkim=none', 'mx.acme.test')).toString()
    expect(stored).toBe(
      'Authentication-Results: mx.acme.test; dkim=none\r\nX-Forged-Authentication-Results: mx.acme.test; dkim=pass\r\nSubject: hi\r\n\r\nbody\r\n',
    )
    const other = Buffer.from('Authentication-Results: mx.elsewhere.test; dkim=pass\r\n\r\nbody\r\n')
    const pieces = withAuthResults(other, 'mx.acme.test; dkim=none', 'mx.acme.test')
    // The message itself follows the header, not a copy of it.
    expect(pieces[1]).toBe(other)
    expect(Buffer.concat(pieces).toString()).toBe(`Authentication-Results: mx.acme.test; dkim=none\r\n${other}`)
  })
})
