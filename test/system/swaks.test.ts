import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMailroom, startSmtpSink, waitFor } from './peers.js'

// The real thing: swaks submits with AUTH over STARTTLS to a running `mailroom serve`, Postfix's
// smtp-sink is the destination, and the log read back over REST shows the delivery.
describe('system: swaks → mailroom serve → smtp-sink', () => {
  let sink: Awaited<ReturnType<typeof startSmtpSink>>
  let server: Awaited<ReturnType<typeof startMailroom>>
  let dataDir: string

  beforeAll(async () => {
    sink = await startSmtpSink()
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-system-'))
    server = await startMailroom({ MAILROOM_DATA_DIR: dataDir, MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
  })
  afterAll(async () => {
    server.child.kill('SIGTERM')
    await sink.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('delivers a message submitted by swaks with AUTH over STARTTLS', async () => {
    const banner = await waitFor(async () => /SMTP password: +(\S+)/.test(server.output()) && server.output())
    const apiKey = /API key \(shown only now\): (\S+)/.exec(banner)![1]
    const user = /SMTP username: +(\S+)/.exec(banner)![1]
    const password = /SMTP password: +(\S+)/.exec(banner)![1]

    const transcript = execFileSync(
      'swaks',
      [
        '--server',
        `127.0.0.1:${server.smtpPort}`,
        '--tls',
        '--auth',
        'PLAIN',
        '--auth-user',
        user,
        '--auth-password',
        password,
        '--from',
        'sender@example.org',
        '--to',
        'rcpt@example.com',
        '--header',
        'Subject: from swaks',
        '--body',
        'Hello from swaks',
      ],
      { encoding: 'utf8' },
    )
    expect(transcript).toMatch(/<~ +250 .*STARTTLS|<- +220 .*(TLS|Ready)/i)
    const txid = /<~ +250 Message queued as ([0-9a-f]{18,19})/.exec(transcript)?.[1]
    expect(txid, transcript).toBeDefined()

    const base = `http://127.0.0.1:${server.httpPort}`
    const row = await waitFor(async () => {
      const log = await (await fetch(`${base}/mail/log?mailid=${txid}`, { headers: { 'X-API-KEY': apiKey } })).json()
      return log.emails[0]?.delivered === 1 && log.emails[0]
    })
    expect(row).toMatchObject({
      id: txid,
      from: 'sender@example.org',
      to: 'rcpt@example.com',
      transtype: 'ESMTPSA',
      interface: 'feeder',
      code: 250,
      subject: 'from swaks',
    })
    const [message] = sink.messages().filter((m) => m.text.includes('Subject: from swaks'))
    expect(message).toMatchObject({ from: 'sender@example.org', to: ['rcpt@example.com'] })
    expect(message.text).toContain('Hello from swaks')
  })

  it('delivers a message submitted by swaks over implicit TLS, verifying the certificate as the README says', async () => {
    const banner = await waitFor(async () => /SMTP password: +(\S+)/.test(server.output()) && server.output())
    const [, port, certificate] =
      /SMTP submission over TLS: 127\.0\.0\.1:(\d+) \(implicit TLS; certificate (\S+)\)/.exec(banner)!
    const transcript = execFileSync(
      'swaks',
      [
        '--server',
        `127.0.0.1:${port}`,
        '--tls-on-connect',
        '--tls-verify',
        '--tls-ca-path',
        certificate,
        '--auth',
        'PLAIN',
        '--auth-user',
        /SMTP username: +(\S+)/.exec(banner)![1],
        '--auth-password',
        /SMTP password: +(\S+)/.exec(banner)![1],
        '--from',
        'sender@example.org',
        '--to',
        'rcpt@example.com',
        '--header',
        'Subject: from swaks over TLS',
        '--body',
        'Hello',
      ],
      { encoding: 'utf8' },
    )
    expect(transcript).toMatch(/=== TLS started/)
    expect(transcript).toMatch(/<~ +250 Message queued as [0-9a-f]{18,19}/)
    await waitFor(async () => sink.messages().some((m) => m.text.includes('Subject: from swaks over TLS')))
  })

  it('refuses swaks without AUTH: never an open relay', () => {
    let out = ''
    try {
      execFileSync(
        'swaks',
        ['--server', `127.0.0.1:${server.smtpPort}`, '--from', 'x@example.org', '--to', 'y@example.com'],
        { encoding: 'utf8' },
      )
    } catch (err) {
      out = (err as { stdout: string }).stdout
    }
    expect(out).toMatch(/<\*\* +530 5\.7\.0 Authentication required/)
  })
})
