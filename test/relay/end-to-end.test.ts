import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningServer } from '../../serve.js'
import { mcpClient, startTestServer } from '../helpers.js'
import { startSink } from './sink.js'

// `mailroom serve` in process: REST, MCP and SMTP submission in front of one pipeline, and the
// delivery worker handing everything to a real SMTP sink as the MX.
describe('every door delivers', () => {
  let dataDir: string
  let server: RunningServer
  let sink: Awaited<ReturnType<typeof startSink>>
  let apiKey: string
  let smtpUser: string
  let smtpPassword: string
  let base: string

  beforeAll(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-e2e-', { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    ;({ server, dataDir, apiKey } = started)
    smtpUser = started.smtp.user
    smtpPassword = started.smtp.pass
    base = `http://127.0.0.1:${server.httpPort}`
  })
  afterAll(async () => {
    await server.stop()
    await sink.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const headers = () => ({ 'X-API-KEY': apiKey, 'Content-Type': 'application/json' })
  const delivered = async (txid: string) => {
    await expect
      .poll(
        async () => {
          const log = await (await fetch(`${base}/mail/log?mailid=${txid}`, { headers: headers() })).json()
          return log.emails.length > 0 && log.emails.every((e: { delivered: number }) => e.delivered === 1)
        },
        { timeout: 15_000, interval: 100 },
      )
      .toBe(true)
    return (await (await fetch(`${base}/mail/log?mailid=${txid}`, { headers: headers() })).json()).emails
  }
  const sunk = (subject: string) => sink.messages.filter((m) => m.raw.toString().includes(`Subject: ${subject}`))

  it('a REST send', async () => {
    const res = await fetch(`${base}/mail/send`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ from: 'me@example.org', to: 'bob@example.com', subject: 'via REST', body: 'hello' }),
    })
    const { text: txid } = await res.json()
    const rows = await delivered(txid)
    expect(rows[0]).toMatchObject({ transtype: 'HTTP', interface: 'api', code: 250, mxHostname: '127.0.0.1' })
    const [m] = sunk('via REST')
    expect(m).toMatchObject({ from: 'me@example.org', to: ['bob@example.com'] })
    expect(m.raw.toString()).toMatch(/^Reply-To: me@example.org\r$/m)
  })

  it('a sendAdvMail over MCP: Bcc gets the mail and is in no header', async () => {
    const client = await mcpClient(base, apiKey)
    const result = await client.callTool({
      name: 'sendAdvMail',
      arguments: {
        from: { email: 'me@example.org', name: 'Me' },
        to: 'Bob <bob@example.com>',
        cc: [{ email: 'carol@example.net' }],
        bcc: 'audit@example.org',
        subject: 'via MCP',
        body: '<p>hi</p>',
      },
    })
    await client.close()
    const txid = (result.structuredContent as { text: string }).text
    const rows = await delivered(txid)
    expect(rows.map((r: { recipient: string }) => r.recipient).sort()).toEqual([
      'audit@example.org',
      'bob@example.com',
      'carol@example.net',
    ])
    const all = sunk('via MCP')
    expect(all.flatMap((m) => m.to).sort()).toEqual(['audit@example.org', 'bob@example.com', 'carol@example.net'])
    for (const m of all) {
      const head = m.raw.toString().split('\r\n\r\n')[0]
      expect(head).not.toMatch(/^bcc:/im)
      expect(head).not.toContain('audit@example.org')
      expect(head).toMatch(/^Cc: carol@example.net\r?$/m)
      expect(m.from).toBe('me@example.org')
    }
  })

  it('a rawMail with a DKIM-Signature arrives byte for byte', async () => {
    const raw =
      'DKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=sel; h=from:to:subject; bh=abc=; b=xyz=\r\n' +
      'From: Me <me@example.org>\r\nTo: bob@example.com\r\nSubject: via rawsend\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n' +
      'Message-ID: <raw-1@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nUnchanged body.\r\n'
    const res = await fetch(`${base}/mail/rawsend`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ raw_email: raw }),
    })
    const { text: txid } = await res.json()
    await delivered(txid)
    const [m] = sunk('via rawsend')
    expect(m.raw.toString()).toBe(raw)
    expect(m).toMatchObject({ from: 'me@example.org', to: ['bob@example.com'] })
  })

  it('a message from an ordinary SMTP client', async () => {
    const transport = nodemailer.createTransport({
      host: '127.0.0.1',
      port: server.smtpPort,
      secure: false,
      requireTLS: true,
      auth: { user: smtpUser, pass: smtpPassword },
      tls: { rejectUnauthorized: false },
    })
    const info = await transport.sendMail({
      from: 'me@example.org',
      to: 'bob@example.com',
      bcc: 'hidden@example.net',
      subject: 'via SMTP',
      text: 'hello',
    })
    transport.close()
    const txid = /Message queued as ([0-9a-f]{18,19})/.exec(info.response)![1]
    const rows = await delivered(txid)
    expect(rows.map((r: { recipient: string; transtype: string }) => [r.recipient, r.transtype]).sort()).toEqual([
      ['bob@example.com', 'ESMTPSA'],
      ['hidden@example.net', 'ESMTPSA'],
    ])
    expect(
      sunk('via SMTP')
        .flatMap((m) => m.to)
        .sort(),
    ).toEqual(['bob@example.com', 'hidden@example.net'])
  })

  it('a message over implicit TLS (RFC 8314), from a client that trusts the generated certificate', async () => {
    const certificate = /SMTP submission over TLS: 127\.0\.0\.1:(\d+) \(implicit TLS; certificate (\S+)\)/.exec(
      server.firstStart!,
    )!
    expect(Number(certificate[1])).toBe(server.smtpsPort)
    expect(certificate[2]).toBe(join(dataDir, 'smtp-cert.pem'))
    // Verified as a client verifies any server: the certificate names 127.0.0.1, and is its own CA.
    const transport = nodemailer.createTransport({
      host: '127.0.0.1',
      port: server.smtpsPort!,
      secure: true,
      auth: { user: smtpUser, pass: smtpPassword },
      tls: { ca: readFileSync(certificate[2]) },
    })
    const info = await transport.sendMail({
      from: 'me@example.org',
      to: 'bob@example.com',
      subject: 'via SMTPS',
      text: 'hello',
    })
    transport.close()
    const txid = /Message queued as ([0-9a-f]{18,19})/.exec(info.response)![1]
    const rows = await delivered(txid)
    expect(rows).toMatchObject([{ recipient: 'bob@example.com', transtype: 'ESMTPSA', interface: 'feeder' }])
    expect(sunk('via SMTPS').flatMap((m) => m.to)).toEqual(['bob@example.com'])
  })
})
