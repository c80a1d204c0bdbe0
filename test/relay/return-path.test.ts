import { readFileSync } from 'node:fs'
import { createTransport } from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addDomainKey } from '../../cli/domains.js'
import { startRelayServer } from './relay-server.js'

/** Postfix 3.7's own bounce of a message to an unknown local user (nosuch@dest.test), as it sent it to the message's return path. */
const POSTFIX_DSN = readFileSync(new URL('../fixtures/postfix-dsn-unknown-user.eml', import.meta.url))
/** A feedback loop's abuse report about a message to ann@dest.test (RFC 5965). */
const ARF = readFileSync(new URL('../fixtures/arf-abuse.eml', import.meta.url))

// `mailroom serve` in process with MAILROOM_RETURN_PATH=bounces: news.test sends and receives for
// account 1, its mail leaves for a sink (which takes everything: a 250) with a return path per
// recipient, and what comes back there after the 250 is delivered to the MX door as the
// destination's server would: from the null sender, to that return path.
describe('late bounces and complaints at the return path', () => {
  let t: Awaited<ReturnType<typeof startRelayServer>>

  beforeAll(async () => {
    t = await startRelayServer(
      'mailroom-return-path-',
      { MAILROOM_MX_LISTEN_PORT: '0', MAILROOM_MX_HOSTNAME: 'mx.news.test', MAILROOM_RETURN_PATH: 'bounces' },
      ['message.failed', 'recipient.complained'],
    )
    const added = await addDomainKey(t.admin, { accountId: 1, domain: 'news.test', algorithm: 'ed25519' })
    // `domain add` names the return path's SPF record too.
    expect(added.records.at(-1)).toEqual({
      type: 'TXT',
      name: 'bounces.news.test',
      value: expect.stringMatching(/^v=spf1 a:/),
    })
    const receive = await api('POST', '/domains/news.test/receiving', { receiving: true })
    expect(await receive.json()).toMatchObject({
      mx: { type: 'MX', name: 'news.test', value: '10 mx.news.test.' },
      returnPathMx: { type: 'MX', name: 'bounces.news.test', value: '10 mx.news.test.' },
    })
  })
  afterAll(() => t?.close())

  const api = (method: string, path: string, body?: unknown) => t.api(method, path, body)
  const json = async (path: string) => (await api('GET', path)).json()
  /** The message's recipients once each is final, by address. */
  const story = async (txid: string) => {
    await expect
      .poll(
        async () =>
          (await json(`/mail/log/${txid}`)).recipients?.every(
            (r: { status: string }) => r.status !== 'queued' && r.status !== 'deferred',
          ),
        {
          timeout: 15_000,
        },
      )
      .toBe(true)
    const message = await json(`/mail/log/${txid}`)
    return new Map<
      string,
      {
        status: string
        suppressed: boolean
        timeline: { event: string; code: number | null; response: string }[]
      }
    >(message.recipients.map((r: { recipient: string }) => [r.recipient, r]))
  }
  /** The destination's server handing a report to the MX door: from the null sender. */
  const report = async (to: string, raw: Buffer) => {
    const transport = createTransport({
      host: '127.0.0.1',
      port: t.server.mxPort!,
      name: 'mx.dest.test',
      tls: { rejectUnauthorized: false },
    })
    try {
      return await transport.sendMail({ envelope: { from: '', to: [to] }, raw })
    } catch (err) {
      return err as Error & { responseCode: number; response: string }
    } finally {
      transport.close()
    }
  }
  const returnPathOf = (recipient: string) => t.sink.messages.find((m) => m.to.includes(recipient))!.from

  let txid: string

  it('sends each recipient a copy with a return path of its own at bounces.news.test', async () => {
    const res = await api('POST', '/mail/send', {
      from: 'letters@news.test',
      to: ['nosuch@dest.test', 'ann@dest.test', 'bob@dest.test'],
      subject: 'This week at News',
      body: 'This week.',
    })
    txid = (await res.json()).text
    const recipients = await story(txid)
    expect([...recipients.values()].map((r) => r.status)).toEqual(['delivered', 'delivered', 'delivered'])
    const paths = ['nosuch@dest.test', 'ann@dest.test', 'bob@dest.test'].map(returnPathOf)
    for (const p of paths) expect(p).toMatch(/^b[0-9a-f]{32}@bounces\.news\.test$/)
    expect(new Set(paths).size).toBe(3)
    // Mail from a domain that does not receive keeps its sender.
    await api('POST', '/mail/send', { from: 'me@elsewhere.test', to: 'carol@dest.test', subject: 'plain', body: 'b' })
    await expect
      .poll(() => t.sink.messages.some((m) => m.to.includes('carol@dest.test')), { timeout: 15_000 })
      .toBe(true)
    expect(returnPathOf('carol@dest.test')).toBe('me@elsewhere.test')
  })

  it('a forged or altered return path is refused at RCPT, and nothing changes', async () => {
    const real = returnPathOf('bob@dest.test')
    const altered = real.replace(/[0-9a-f](?=@)/, (c) => (c === '0' ? '1' : '0'))
    // The MAC covers the domain: bob's token is good at bounces.news.test only.
    const elsewhere = `${real.split('@')[0]}@bounces.other.test`
    for (const to of [altered, `b${'0'.repeat(32)}@bounces.news.test`, elsewhere]) {
      const refused = await report(to, POSTFIX_DSN)
      expect(refused).toMatchObject({ responseCode: 550 })
      expect((refused as Error).message).toContain('relay not permitted')
    }
    expect((await story(txid)).get('bob@dest.test')!.status).toBe('delivered')
  })

  it("Postfix's DSN for an unknown user fails the recipient after its 250, suppresses it, and tells the webhook", async () => {
    const accepted = await report(returnPathOf('nosuch@dest.test'), POSTFIX_DSN)
    expect(accepted).toMatchObject({ response: expect.stringMatching(/^250 2\.0\.0 Report taken/) })
    const nosuch = (await story(txid)).get('nosuch@dest.test')!
    expect(nosuch.status).toBe('failed')
    expect(nosuch.suppressed).toBe(true)
    expect(nosuch.timeline.map((h) => h.event)).toEqual(['accepted', 'delivered', 'failed', 'suppressed'])
    expect(nosuch.timeline[2]).toMatchObject({
      code: 550,
      response: 'a bounce after delivery: 5.1.1 unknown user: "nosuch"',
    })
    const log = await json(`/mail/log?mailid=${txid}`)
    expect(log.emails.find((e: { recipient: string }) => e.recipient === 'nosuch@dest.test')).toMatchObject({
      delivered: 0,
      code: 550,
    })
    const { suppressions } = await json('/mail/suppressions')
    expect(suppressions).toEqual([
      expect.objectContaining({
        address: 'nosuch@dest.test',
        mailid: txid,
        reason: 'a message to it bounced after delivery: 5.1.1 unknown user: "nosuch"',
      }),
    ])
    await expect
      .poll(() => t.endpoint.received.filter((r) => r.event.type === 'message.failed').length, { timeout: 10_000 })
      .toBe(1)
    expect(t.endpoint.received[0].event.data).toMatchObject({
      transactionId: txid,
      recipient: 'nosuch@dest.test',
      code: 550,
      suppressed: true,
    })
    // The same report again changes nothing and tells nobody again.
    await report(returnPathOf('nosuch@dest.test'), POSTFIX_DSN)
    expect((await story(txid)).get('nosuch@dest.test')!.timeline).toHaveLength(4)
    const refused = await api('POST', '/mail/send', {
      from: 'letters@news.test',
      to: 'nosuch@dest.test',
      subject: 's',
      body: 'b',
    })
    expect(refused.status).toBe(400)
    expect((await refused.json()).message).toMatch(
      /^to: recipient nosuch@dest\.test is on this account's local block list/,
    )
  })

  it('an abuse report suppresses the complaining recipient and tells the webhook; the others still get mail', async () => {
    const accepted = await report(returnPathOf('ann@dest.test'), ARF)
    expect(accepted).toMatchObject({ response: expect.stringMatching(/^250 /) })
    const { suppressions } = await json('/mail/suppressions')
    expect(suppressions.map((s: { address: string; reason: string }) => [s.address, s.reason])).toContainEqual([
      'ann@dest.test',
      'complained: abuse report from a feedback loop',
    ])
    await expect
      .poll(() => t.endpoint.received.find((r) => r.event.type === 'recipient.complained')?.event.data, {
        timeout: 10_000,
      })
      .toEqual({ recipient: 'ann@dest.test', transactionId: txid, via: 'abuse' })
    expect((await story(txid)).get('ann@dest.test')).toMatchObject({ status: 'delivered', suppressed: true })
    expect((await story(txid)).get('ann@dest.test')!.timeline.at(-1)).toMatchObject({
      event: 'suppressed',
      response:
        "ann@dest.test was put on this account's suppression list (complained: abuse report from a feedback loop): sends to it are refused until it is delisted",
    })
    // A complaint about a recipient suppressed already (nosuch bounced) is told all the same.
    await report(returnPathOf('nosuch@dest.test'), ARF)
    await expect
      .poll(() => t.endpoint.received.filter((r) => r.event.type === 'recipient.complained').length, {
        timeout: 10_000,
      })
      .toBe(2)
    expect(t.endpoint.received.filter((r) => r.event.type === 'recipient.complained')[1].event.data).toEqual({
      recipient: 'nosuch@dest.test',
      transactionId: txid,
      via: 'abuse',
    })
    // Reports are not mail sent: the order's usage counts the two sends only.
    expect((await json('/mail/stats')).usage).toBe(2)
    expect(
      (await api('POST', '/mail/send', { from: 'letters@news.test', to: 'bob@dest.test', subject: 's', body: 'b' }))
        .status,
    ).toBe(200)
  })

  it('a failure of a recipient still being tried is answered 451, to come again; a large report, or one mixed with mail, is refused', async () => {
    let sender = ''
    let deferredFrom = ''
    t.sink.state.mailRule = (from) => {
      sender = from
      return undefined
    }
    t.sink.state.rcptRule = (rcpt) => {
      if (rcpt !== 'later@dest.test') return undefined
      deferredFrom = sender
      return { code: 451, message: '4.3.0 try later' }
    }
    try {
      await api('POST', '/mail/send', { from: 'letters@news.test', to: 'later@dest.test', subject: 'later', body: 'b' })
      await expect.poll(() => deferredFrom, { timeout: 15_000 }).toMatch(/@bounces\.news\.test$/)
      const dsn = Buffer.from(
        POSTFIX_DSN.toString('latin1').replaceAll('nosuch@dest.test', 'later@dest.test'),
        'latin1',
      )
      const later = await report(deferredFrom, dsn)
      expect(later).toMatchObject({ responseCode: 451 })
      expect((later as Error).message).toContain(
        '4.3.0 The message this reports on is still being recorded; try again later',
      )
    } finally {
      t.sink.state.mailRule = undefined
      t.sink.state.rcptRule = undefined
    }
    const large = Buffer.concat([POSTFIX_DSN, Buffer.alloc(1024 * 1024, 'x')])
    const refused = await report(returnPathOf('bob@dest.test'), large)
    expect(refused).toMatchObject({ responseCode: 552 })
    expect((refused as Error).message).toContain('5.3.4 A report to a return path is at most 1048576 bytes')
    await api('POST', '/inboxes', { address: 'desk@news.test' })
    const transport = createTransport({ host: '127.0.0.1', port: t.server.mxPort!, tls: { rejectUnauthorized: false } })
    try {
      const mixed = await transport.sendMail({
        envelope: { from: '', to: [returnPathOf('bob@dest.test'), 'desk@news.test'] },
        // An auto-reply: a return path names its recipient whatever a report says, so a DSN here would fail bob.
        raw: 'From: bob@dest.test\r\nSubject: Away\r\n\r\nI am away until Monday.\r\n',
      })
      expect(mixed.rejected).toEqual(['desk@news.test'])
      expect(mixed.rejectedErrors?.[0].message).toContain(
        '452 4.5.3 Reports to a return path and mail to inboxes go in separate transactions',
      )
      // One return path a transaction: each report is read apart.
      const two = await transport.sendMail({
        envelope: { from: '', to: [returnPathOf('bob@dest.test'), returnPathOf('ann@dest.test')] },
        raw: 'From: bob@dest.test\r\nSubject: Away\r\n\r\nI am away until Monday.\r\n',
      })
      expect(two.rejected).toEqual([returnPathOf('ann@dest.test')])
      expect(two.rejectedErrors?.[0].message).toContain(
        '452 4.5.3 One return path per transaction: send the others in another one',
      )
    } finally {
      transport.close()
    }
    expect((await story(txid)).get('bob@dest.test')!.status).toBe('delivered')
  })
})
