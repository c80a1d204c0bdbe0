import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { DKIMSignOptions } from 'mailauth'
import { dkimSign } from 'mailauth/lib/dkim/sign.js'
import { dkimVerify } from 'mailauth/lib/dkim/verify.js'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAccount } from '../../accounts.js'
import { addDomainKey, checkRecords, type AddedKey } from '../../cli/domains.js'
import { loadConfig } from '../../config.js'
import { dnsRecords, generateDkimKey, signingDomains, withCrlf } from '../../relay/dkim.js'
import { openRuntime, type Runtime } from '../../runtime.js'
import { startServer, type RunningServer } from '../../serve.js'
import { firstStartCredentials, silentLogger } from '../helpers.js'
import { startSink } from './sink.js'

/** What a receiver's DNS answers: only the TXT records given, NXDOMAIN for every other name. */
const resolverOf = (records: { name: string; value: string }[]) => async (name: string, type: string) => {
  const found = records.filter((r) => type === 'TXT' && r.name === name)
  if (!found.length) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
  // As DNS hands a long value over: strings of at most 255 characters.
  return found.map((r) => r.value.match(/.{1,255}/g) as string[])
}

/** The DKIM results of a message as a receiver sees them, `domain/selector: result` each. */
async function verify(raw: Buffer, records: { name: string; value: string }[]) {
  const { results } = await dkimVerify(raw, { resolver: resolverOf(records) })
  return results.map((r) => `${r.signingDomain}/${r.selector}: ${r.status.result}`)
}

// `mailroom serve` in process, delivering to a sink; the domains are added through a second
// connection to its data directory, as `mailroom domain add` does from another process.
describe('DKIM signing of every door', () => {
  let dataDir: string
  let server: RunningServer
  let admin: Runtime
  let sink: Awaited<ReturnType<typeof startSink>>
  let apiKey: string
  let smtp: { user: string; pass: string }
  let base: string
  let signed: AddedKey
  let ed: AddedKey
  /** Every record `domain add` printed: the receiver's whole DNS. */
  const published: { name: string; value: string }[] = []

  beforeAll(async () => {
    sink = await startSink()
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-dkim-'))
    const config = loadConfig({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_HTTP_PORT: '0',
      MAILROOM_SMTP_PORT: '0',
      MAILROOM_SMTPS_PORT: 'off',
      MAILROOM_LOG_LEVEL: 'silent',
      MAILROOM_NODE_NAME: 'mx.relay.test',
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    })
    server = await startServer(config, { engine: 'in-process' })
    ;({ apiKey, smtp } = firstStartCredentials(server.firstStart!))
    base = `http://127.0.0.1:${server.httpPort}`
    admin = openRuntime(config, { logger: silentLogger })
    signed = await addDomainKey(admin, { accountId: 1, domain: 'signed.test', algorithm: 'rsa' })
    ed = await addDomainKey(admin, { accountId: 1, domain: 'ed.test', algorithm: 'ed25519' })
    const other = await createAccount(admin, 'other')
    for (const domain of ['theirs.test', 'team.signed.test'])
      await addDomainKey(admin, { accountId: other.account.id, domain, algorithm: 'rsa' })
    published.push(...signed.records, ...ed.records)
  })
  afterAll(async () => {
    await admin?.close()
    await server?.stop()
    await sink?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const headers = () => ({ 'X-API-KEY': apiKey, 'Content-Type': 'application/json' })
  /** The message as the sink received it, once delivered. */
  const arrived = async (subject: string) => {
    await expect
      .poll(() => sink.messages.some((m) => m.raw.includes(subject)), { timeout: 15_000, interval: 50 })
      .toBe(true)
    return sink.messages.find((m) => m.raw.includes(subject))!.raw
  }
  const rest = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers: headers(), body: JSON.stringify(body) })
    expect(res.status).toBe(200)
  }
  const smtpTransport = () =>
    nodemailer.createTransport({
      host: '127.0.0.1',
      port: server.smtpPort,
      secure: false,
      requireTLS: true,
      auth: smtp,
      tls: { rejectUnauthorized: false },
    })

  it('a REST send from a sending domain arrives with a signature its DNS record verifies', async () => {
    expect(signed.records.map((r) => r.name)).toEqual([
      `${signed.selector}._domainkey.signed.test`,
      'signed.test',
      '_dmarc.signed.test',
    ])
    await rest('/mail/send', { from: 'me@signed.test', to: 'bob@example.com', subject: 'dkim REST', body: 'hello' })
    const raw = await arrived('dkim REST')
    expect(raw.toString()).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=signed.test;/)
    expect(await verify(raw, published)).toEqual([`signed.test/${signed.selector}: pass`])
    // The receiver has nothing but the printed record: without it, the signature cannot pass.
    expect(await verify(raw, [])).not.toContain(`signed.test/${signed.selector}: pass`)
  })

  it('an MCP send with an attachment, from a subdomain, is signed for the parent domain', async () => {
    const client = new Client({ name: 'agent', version: '1' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { 'X-API-KEY': apiKey } } }),
    )
    const result = await client.callTool({
      name: 'sendAdvMail',
      arguments: {
        from: { email: 'me@news.signed.test', name: 'Zoë Ünïcode' },
        to: 'Bob <bob@example.com>',
        cc: [{ email: 'carol@example.net' }],
        subject: 'dkim MCP',
        body: '<p>hi</p>',
        attachments: [{ filename: 'report.pdf', data: Buffer.alloc(20_000, 7).toString('base64') }],
      },
    })
    await client.close()
    expect(result.isError).toBeFalsy()
    const raw = await arrived('dkim MCP')
    expect(await verify(raw, published)).toEqual([`signed.test/${signed.selector}: pass`])
  })

  it('an SMTP submission is signed above its Received line, which the signature does not cover', async () => {
    const transport = smtpTransport()
    await transport.sendMail({
      from: 'me@signed.test',
      to: 'bob@example.com',
      subject: 'dkim SMTP',
      text: 'hello',
      attachments: [{ filename: 'a.bin', content: Buffer.alloc(5000, 1) }],
    })
    transport.close()
    const raw = await arrived('dkim SMTP')
    const head = raw.toString().split('\r\n\r\n')[0]
    expect(head).toMatch(/^DKIM-Signature: [\s\S]*?\r\nReceived: from /)
    expect(head).not.toMatch(/h=[^;]*received/i)
    expect(await verify(raw, published)).toEqual([`signed.test/${signed.selector}: pass`])
  })

  it('dot lines, an 8-bit body and long folded headers sent over SMTP keep the signature valid', async () => {
    const subject = `dkim edges ${'long words '.repeat(40)}`.trim()
    const raw = [
      'From: Me <me@signed.test>',
      'To: bob@example.com',
      `Subject: ${subject.replace(/(.{70}) /g, '$1\r\n ')}`,
      `References: ${Array.from({ length: 20 }, (_, i) => `<ref-${i}@signed.test>`).join('\r\n\t')}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: 8bit',
      '',
      '.a line that starts with a dot',
      '..two dots',
      '.',
      'Grüße, naïve café, 日本語',
      'trailing spaces   \t',
      '',
      '',
    ].join('\r\n')
    const transport = smtpTransport()
    await transport.sendMail({
      envelope: { from: 'me@signed.test', to: ['bob@example.com'] },
      raw: Buffer.from(raw),
    })
    transport.close()
    const got = await arrived('dkim edges')
    expect(got.toString()).toContain('\r\n.a line that starts with a dot\r\n..two dots\r\n.\r\nGrüße')
    expect(await verify(got, published)).toEqual([`signed.test/${signed.selector}: pass`])
  })

  it('a rawsend with bare LF line ends is signed as delivered, in CRLF', async () => {
    const raw =
      'From: me@signed.test\nTo: bob@example.com\nSubject: dkim LF\nMIME-Version: 1.0\n\nline one\n.dot line\r\nbare CR\rend\n'
    await rest('/mail/rawsend', { raw_email: raw })
    const got = await arrived('dkim LF')
    expect(got.toString()).toContain('line one\r\n.dot line\r\nbare CR\r\nend\r\n')
    expect(await verify(got, published)).toEqual([`signed.test/${signed.selector}: pass`])
  })

  it("a rawsend with the client's own signature keeps it byte for byte, and both pass", async () => {
    const client = generateDkimKey('rsa')
    const clientRecord = dnsRecords({ domain: 'client.test', selector: 'c1', algorithm: 'rsa', ...client }, 'x')[0]
    const message =
      'From: Me <me@signed.test>\r\nTo: bob@example.com\r\nSubject: dkim both\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n' +
      'Message-ID: <both-1@signed.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nBody.\r\n'
    const { signatures } = await dkimSign(message, {
      signatureData: [{ signingDomain: 'client.test', selector: 'c1', privateKey: client.privateKey }],
    } as DKIMSignOptions)
    await rest('/mail/rawsend', { raw_email: signatures + message })
    const got = (await arrived('dkim both')).toString()
    expect(got.endsWith(signatures + message)).toBe(true)
    expect((await verify(Buffer.from(got), [...published, clientRecord])).sort()).toEqual([
      'client.test/c1: pass',
      `signed.test/${signed.selector}: pass`,
    ])
  })

  it('an ed25519 key signs, and its record verifies it (RFC 8463)', async () => {
    expect(ed.records[0].value).toMatch(/^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]{43}=$/)
    await rest('/mail/send', { from: 'me@ed.test', to: 'bob@example.com', subject: 'dkim ed25519', body: 'hello' })
    const raw = await arrived('dkim ed25519')
    expect(raw.toString()).toMatch(/^DKIM-Signature: v=1; a=ed25519-sha256;/)
    expect(await verify(raw, published)).toEqual([`ed.test/${ed.selector}: pass`])
  })

  it("mail from an unregistered domain, or from another account's domain, goes out unsigned", async () => {
    for (const [from, subject] of [
      ['me@unregistered.test', 'dkim none'],
      ['me@theirs.test', 'dkim theirs'],
      // A subdomain another account registered is theirs, though this account has the parent.
      ['me@team.signed.test', 'dkim team'],
    ]) {
      await rest('/mail/send', { from, to: 'bob@example.com', subject, body: 'hello' })
      expect((await arrived(subject)).toString()).not.toMatch(/^DKIM-Signature:/im)
    }
  })

  it('after a rotation the old key signs until it is removed, then the new one (from the next message)', async () => {
    const rotated = await addDomainKey(admin, {
      accountId: 1,
      domain: 'signed.test',
      selector: 'next',
      algorithm: 'rsa',
      rotate: true,
    })
    const records = [...published, rotated.records[0]]
    await rest('/mail/send', { from: 'me@signed.test', to: 'bob@example.com', subject: 'dkim rotating', body: 'a' })
    expect(await verify(await arrived('dkim rotating'), records)).toEqual([`signed.test/${signed.selector}: pass`])
    expect(await admin.store.domains.remove('signed.test', signed.selector)).toBe(true)
    await rest('/mail/send', { from: 'me@signed.test', to: 'bob@example.com', subject: 'dkim rotated', body: 'b' })
    expect(await verify(await arrived('dkim rotated'), records)).toEqual(['signed.test/next: pass'])
  })
})

describe('signing domains', () => {
  it('are the From domain and its parents, most specific first', () => {
    expect(signingDomains('Me@A.News.Example.COM')).toEqual(['a.news.example.com', 'news.example.com', 'example.com'])
    expect(signingDomains('me@example.com.')).toEqual(['example.com'])
  })

  it('line ends are made CRLF as delivery makes them, without a copy when they are', () => {
    const clean = Buffer.from('a: b\r\n\r\nbody\r\n')
    expect(withCrlf(clean)).toBe(clean)
    expect(withCrlf(Buffer.from('a\nb\rc\r\r\nd')).toString()).toBe('a\r\nb\r\nc\r\n\r\nd')
  })
})

describe('domain check', () => {
  const key = { domain: 'example.com', selector: 's1', algorithm: 'rsa' as const, publicKey: 'QUJD' }
  const expected = dnsRecords(key, 'mx.relay.test')
  const lookup = (zone: Record<string, string[][]>) => async (name: string) => {
    if (zone[name]) return zone[name]
    throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
  }
  const summary = (checked: Awaited<ReturnType<typeof checkRecords>>) =>
    checked.map((c) => `${c.name} ${c.published ? 'published' : 'missing'} ${c.matches ? 'matches' : 'differs'}`)

  it('says a record published as printed matches, also split into strings and among other TXT records', async () => {
    const checked = await checkRecords(
      expected,
      lookup({
        's1._domainkey.example.com': [['v=DKIM1; k=rsa; ', 'p=QU JD']],
        'example.com': [['google-site-verification=x'], ['v=spf1 include:_spf.example.net a:MX.relay.test ~all']],
        '_dmarc.example.com': [['v=DMARC1; p=quarantine; rua=mailto:d@example.com']],
      }),
    )
    expect(summary(checked)).toEqual([
      's1._domainkey.example.com published matches',
      'example.com published matches',
      '_dmarc.example.com published matches',
    ])
    expect(checked[1].found).toEqual(['v=spf1 include:_spf.example.net a:MX.relay.test ~all'])
  })

  it('says which are missing, and which differ: another key, an SPF record without this relay, two SPF records', async () => {
    const differs = await checkRecords(
      expected,
      lookup({
        's1._domainkey.example.com': [['v=DKIM1; k=rsa; p=WFla']],
        'example.com': [['v=spf1 a:mx.relay.test ~all'], ['v=spf1 -all']],
      }),
    )
    expect(summary(differs)).toEqual([
      's1._domainkey.example.com published differs',
      'example.com published differs',
      '_dmarc.example.com missing differs',
    ])
    const without = await checkRecords(expected, lookup({ 'example.com': [['v=spf1 mx ~all']] }))
    expect(summary(without)[1]).toBe('example.com published differs')
  })

  it('a failed lookup (not an absent record) is an error, not a missing record', async () => {
    const failing = async () => {
      throw Object.assign(new Error('queryTxt ESERVFAIL example.com'), { code: 'ESERVFAIL' })
    }
    await expect(checkRecords(expected, failing)).rejects.toThrow(/ESERVFAIL/)
  })
})
