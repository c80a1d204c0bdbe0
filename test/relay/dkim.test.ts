import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import type { DKIMSignOptions } from 'mailauth'
import { dkimSign } from 'mailauth/lib/dkim/sign.js'
import { dkimVerify } from 'mailauth/lib/dkim/verify.js'
import { formatRelaxedLine } from 'mailauth/lib/tools.js'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAccount } from '../../accounts.js'
import { addDomainKey, type AddedKey } from '../../cli/domains.js'
import { checkRecords } from '../../relay/domain-check.js'
import {
  dkimSignature,
  dnsRecords,
  generateDkimKey,
  relaxedBody,
  relaxedHeader,
  signingDomains,
  withCrlf,
} from '../../relay/dkim.js'
import { openRuntime, type Runtime } from '../../runtime.js'
import type { RunningServer } from '../../serve.js'
import { mcpClient, silentLogger, startTestServer } from '../helpers.js'
import { resolverOf } from './inbound-support.js'
import { startSink } from './sink.js'

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
    const started = await startTestServer('mailroom-dkim-', {
      MAILROOM_SMTPS_PORT: 'off',
      MAILROOM_NODE_NAME: 'mx.relay.test',
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    })
    ;({ server, dataDir, apiKey, smtp } = started)
    const { config } = started
    base = `http://127.0.0.1:${server.httpPort}`
    admin = await openRuntime(config, { logger: silentLogger })
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
    const client = await mcpClient(base, apiKey)
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

// Our signer against mailauth's: the same canonical forms, and signatures its verifier passes.
describe('the signer', () => {
  const HEAD =
    'From: Me <me@signed.test>\r\nTo: bob@example.com\r\nSubject: canon\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n' +
    'Message-ID: <canon@signed.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n'
  const bodies: [string, string][] = [
    ['empty', ''],
    ['only CRLFs', '\r\n\r\n\r\n'],
    ['one line without CRLF', 'no line end'],
    ['trailing spaces and tabs', 'a  \r\nb\t\r\nc \t \r\n'],
    ['runs of spaces and tabs', 'a \t b\t\tc    d\r\n'],
    ['leading spaces and tabs', '  indented\r\n\tx\r\n \t y\r\n'],
    ['blank lines of spaces, inside and at the end', 'a\r\n \t \r\n\r\nb\r\n  \r\n\t\r\n\r\n'],
    ['spaces after the last CRLF', 'a\r\n   '],
    ['only spaces', '   \t  '],
    ['dot lines', '.\r\n..two dots\r\n.a\r\n'],
    ['8-bit', 'Grüße, naïve café, à la 日本語\r\nЖ\u00a0x\r\n'],
    ['a 2,000-character line', `${'x'.repeat(2000)}\r\n`],
    [
      'an attachment',
      `--b\r\nContent-Transfer-Encoding: base64\r\n\r\n${`${'QUJD'.repeat(19)}\r\n`.repeat(300)}--b--\r\n`,
    ],
  ]
  const headers: [string, string][] = [
    ['trailing spaces', 'Subject:  hello   world \t '],
    ['folded over lines', 'Subject: folded\r\n  over\r\n\tlines'],
    ['spaces around the colon and upper case', 'SUBJECT \t:  x'],
    ['an empty value', 'Subject:'],
    ['a value of spaces', 'Subject: \t '],
    ['8-bit', 'Subject: Grüße, naïve café, 日本語'],
    ['a folded list', 'References: <a@x>\r\n\t<b@x>\r\n <c@x>'],
    ['tabs inside', 'To:\tBob\t\t<bob@example.com>\t'],
  ]
  const rsa = generateDkimKey('rsa')
  const ed25519 = generateDkimKey('ed25519')
  const keyOf = (algorithm: 'rsa' | 'ed25519', pair = algorithm === 'rsa' ? rsa : ed25519) =>
    ({ domain: 'signed.test', accountId: 1, selector: algorithm, algorithm, createdAt: 0, ...pair }) as const
  const records = [dnsRecords(keyOf('rsa'), 'x')[0], dnsRecords(keyOf('ed25519'), 'x')[0]]
  const sha256 = (text: string) => createHash('sha256').update(text, 'latin1').digest('base64')
  /** mailauth's own signature of a message, for its bh= and h=. */
  const theirs = async (message: Buffer) => {
    const { signatures } = await dkimSign(message, {
      signatureData: [{ signingDomain: 'signed.test', selector: 'rsa', privateKey: rsa.privateKey }],
    } as DKIMSignOptions)
    return signatures
  }
  const OVERSIGNED = 'From:To:Subject:Date:Message-ID:List-Unsubscribe:List-Unsubscribe-Post'
  const tag = (signature: string, name: string) =>
    signature.match(new RegExp(`[; ]${name}=([^;]*)`))?.[1].replace(/\s+/g, '')

  it.each(bodies)("canonicalizes a body (%s) as mailauth's does", async (_, body) => {
    const message = Buffer.from(`${HEAD}\r\n${body}`)
    expect(sha256(relaxedBody(Buffer.from(body)))).toBe(tag(await theirs(message), 'bh'))
  })

  it.each(headers)("canonicalizes a header field (%s) as mailauth's does", (_, field) => {
    // Both take the field's bytes one for one, as a message's header is read.
    const bytes = Buffer.from(field)
    expect(relaxedHeader(bytes.toString('latin1'))).toBe(formatRelaxedLine(bytes, '\r\n').toString('latin1'))
  })

  it('keeps 8-bit bytes that are not spaces or tabs, such as 0xA0 (RFC 6376 §3.4.2: WSP only)', () => {
    expect(relaxedHeader('Subject: \u00a0x\u00a0 ')).toBe('subject:\u00a0x\u00a0\r\n')
  })

  it.each([
    ...bodies.map(([name, body]) => [`body: ${name}`, HEAD, body]),
    ...headers.map(([name, field]) => [`header: ${name}`, `${HEAD}${field}\r\n`, 'body\r\n']),
  ])('signs a message (%s) that mailauth verifies, with RSA and Ed25519', async (_, head, body) => {
    const message = Buffer.from(`${head}\r\n${body}`)
    for (const algorithm of ['rsa', 'ed25519'] as const) {
      const signature = await dkimSignature(message, keyOf(algorithm), Date.now())
      expect(signature.split('\r\n').every((line) => line.length <= 78)).toBe(true)
      expect(await verify(Buffer.concat([Buffer.from(signature, 'latin1'), message]), records)).toEqual([
        `signed.test/${algorithm}: pass`,
      ])
    }
  })

  it("signs every instance of a repeated field, the last first, as mailauth's h= lists them", async () => {
    const message = Buffer.from(
      `${HEAD}Received: from a\r\nto: carol@example.com\r\nsubject: again\r\nX-Other: x\r\n\r\nbody\r\n`,
    )
    const signature = await dkimSignature(message, keyOf('rsa'), Date.now())
    // mailauth's h=, then the over-signed names.
    expect(tag(signature, 'h')?.toLowerCase()).toBe(`${tag(await theirs(message), 'h')}:${OVERSIGNED}`.toLowerCase())
    expect(tag(signature, 'h')).toBe(
      `subject:to:Content-Type:MIME-Version:Message-ID:Date:Subject:To:From:${OVERSIGNED}`,
    )
    expect(await verify(Buffer.concat([Buffer.from(signature), message]), records)).toEqual(['signed.test/rsa: pass'])
    // The first instance is covered as well as the last: changing it breaks the signature.
    const changed = Buffer.from(message.toString().replace('To: bob@', 'To: mallory@'))
    expect(await verify(Buffer.concat([Buffer.from(signature), changed]), records)).toEqual(['signed.test/rsa: fail'])
  })

  it('over-signs From, To, Subject, Date, Message-ID and List-Unsubscribe: adding one breaks the signature', async () => {
    const message = Buffer.from(`${HEAD}List-Unsubscribe: <https://signed.test/u/1>\r\n\r\nbody\r\n`)
    const signature = Buffer.from(await dkimSignature(message, keyOf('rsa'), Date.now()), 'latin1')
    expect(await verify(Buffer.concat([signature, message]), records)).toEqual(['signed.test/rsa: pass'])
    // A field added above the signed ones (where a mail program may show it instead), or one the
    // message lacked (List-Unsubscribe-Post here), of any over-signed name, breaks it.
    for (const added of [
      'From: Someone Else <ceo@signed.test>',
      'To: victim@example.com',
      'Subject: Urgent: wire transfer',
      'Date: Mon, 1 Jan 2024 00:00:00 +0000',
      'Message-ID: <other@signed.test>',
      'List-Unsubscribe: <https://evil.example/u>',
      'List-Unsubscribe-Post: List-Unsubscribe=One-Click',
    ])
      expect(await verify(Buffer.concat([signature, Buffer.from(`${added}\r\n`), message]), records), added).toEqual([
        'signed.test/rsa: fail',
      ])
    // Any other field added on the way leaves it valid: a relay's Received line, a receiver's header.
    for (const added of ['Received: from relay.example by mx.example', 'X-Spam-Score: 0.1'])
      expect(await verify(Buffer.concat([Buffer.from(`${added}\r\n`), signature, message]), records)).toEqual([
        'signed.test/rsa: pass',
      ])
  })

  it('signs with the key a selector has now, though another was parsed for it before', async () => {
    const message = Buffer.from(`${HEAD}\r\nbody\r\n`)
    await dkimSignature(message, keyOf('rsa'), Date.now())
    const next = generateDkimKey('rsa')
    const signature = await dkimSignature(message, keyOf('rsa', next), Date.now())
    const nextRecords = [dnsRecords(keyOf('rsa', next), 'x')[0]]
    expect(await verify(Buffer.concat([Buffer.from(signature), message]), nextRecords)).toEqual([
      'signed.test/rsa: pass',
    ])
  })

  it('signs a message without an empty line as one with an empty body', async () => {
    // RSA signatures (PKCS #1 v1.5) are deterministic: the same data, the same signature.
    const time = Date.now()
    const withEmptyLine = await dkimSignature(Buffer.from(`${HEAD}\r\n`), keyOf('rsa'), time)
    expect(await dkimSignature(Buffer.from(HEAD), keyOf('rsa'), time)).toBe(withEmptyLine)
    expect(await dkimSignature(Buffer.from(HEAD.slice(0, -2)), keyOf('rsa'), time)).toBe(withEmptyLine)
    // mailauth's parser needs the empty line to find the header's end; the canonical forms are the same.
    const message = Buffer.from(`${withEmptyLine}${HEAD}\r\n`)
    expect(await verify(message, records)).toEqual(['signed.test/rsa: pass'])
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
