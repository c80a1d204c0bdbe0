import { dkimVerify } from 'mailauth/lib/dkim/verify.js'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addDomainKey, type AddedKey } from '../../cli/domains.js'
import { resolverOf } from './inbound-support.js'
import { bulkMail } from '../../relay/unsubscribe.js'
import { startRelayServer } from './relay-server.js'

// `mailroom serve` in process, delivering to a sink, its webhooks posting to an endpoint: bulk
// mail carries a signed one-click link, and the link, used as RFC 8058 says, suppresses its
// recipient and nobody else. Another process adds the sending domain, as `mailroom domain add` does.
describe('one-click unsubscribe', () => {
  let t: Awaited<ReturnType<typeof startRelayServer>>
  let signed: AddedKey

  beforeAll(async () => {
    t = await startRelayServer('mailroom-unsubscribe-', { MAILROOM_PUBLIC_URL: 'https://mail.relay.test' }, [
      'recipient.unsubscribed',
      'message.refused',
    ])
    signed = await addDomainKey(t.admin, { accountId: 1, domain: 'news.test', algorithm: 'rsa' })
  })
  afterAll(() => t?.close())

  const api = (method: string, path: string, body?: unknown) => t.api(method, path, body)
  const arrived = (subject: string) => t.arrived(subject)
  const header = (raw: Buffer, name: string) =>
    raw
      .toString('latin1')
      .split('\r\n\r\n')[0]
      .split('\r\n')
      .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
  /** The link's path on this server: the header names MAILROOM_PUBLIC_URL. */
  const linkOf = (raw: Buffer) => {
    const [line] = header(raw, 'List-Unsubscribe')
    const url = /^List-Unsubscribe: <(https:\/\/mail\.relay\.test\/unsubscribe\/[\w-]+)>$/.exec(line)![1]
    return new URL(url).pathname
  }
  const oneClick = (path: string, body = 'List-Unsubscribe=One-Click', type = 'application/x-www-form-urlencoded') =>
    fetch(`${t.base}${path}`, { method: 'POST', headers: { 'Content-Type': type }, body })
  const suppressions = async () =>
    (await (await api('GET', '/mail/suppressions')).json()).suppressions as { address: string; reason: string }[]
  const send = (to: string | string[], subject: string, extra: Record<string, unknown> = { list: true }) =>
    api('POST', '/mail/send', { from: 'letters@news.test', to, subject, body: 'This week.', ...extra })

  it('a bulk send carries both fields, covered by the DKIM signature; a transactional one carries neither', async () => {
    expect((await send('ann@example.com', 'bulk one')).status).toBe(200)
    const raw = await arrived('bulk one')
    expect(header(raw, 'List-Unsubscribe-Post')).toEqual(['List-Unsubscribe-Post: List-Unsubscribe=One-Click'])
    expect(linkOf(raw)).toMatch(/^\/unsubscribe\/[\w-]{60,}$/)
    const { results } = await dkimVerify(raw, { resolver: resolverOf(signed.records) })
    expect(results.map((r) => r.status.result)).toEqual(['pass'])
    const field = /^DKIM-Signature:((?:.*\r\n[ \t].*)*.*)/m.exec(raw.toString('latin1'))![1]
    const h = /\bh=([^;]+)/.exec(field)![1].replace(/\s+/g, '').toLowerCase().split(':')
    // Signed, and once more than they occur (over-signed): none can be added after.
    expect(h.filter((k) => k === 'list-unsubscribe')).toHaveLength(2)
    expect(h.filter((k) => k === 'list-unsubscribe-post')).toHaveLength(2)

    expect((await send('ann@example.com', 'transactional one', {})).status).toBe(200)
    const plain = await arrived('transactional one')
    expect(header(plain, 'List-Unsubscribe')).toEqual([])
    expect(header(plain, 'List-Unsubscribe-Post')).toEqual([])
  })

  it('a bulk send to several recipients, or bringing its own field, is refused, and nothing is queued', async () => {
    const before = (await (await api('GET', '/mail/log')).json()).total
    const many = await send(['a@example.com', 'b@example.com'], 'bulk many')
    expect(many.status).toBe(400)
    expect(await many.json()).toEqual({
      code: 400,
      message:
        'to: a bulk send (list) goes to one recipient, each with an unsubscribe link of their own; this one has 2: send one message per recipient',
    })
    const raw = await api('POST', '/mail/rawsend', {
      raw_email:
        'From: letters@news.test\r\nTo: ann@example.com\r\nSubject: own field\r\nList-Unsubscribe: <mailto:x@news.test>\r\n\r\nhi\r\n',
      list: true,
    })
    expect(raw.status).toBe(400)
    expect((await raw.json()).message).toBe(
      "the message has a List-Unsubscribe field of its own, and bulk mail (list) gets mailroom's: remove the field, or send it as transactional mail",
    )
    expect((await (await api('GET', '/mail/log')).json()).total).toBe(before)
    // A field quoted in the body is the body's business.
    const quoted = await api('POST', '/mail/rawsend', {
      raw_email:
        'From: letters@news.test\r\nTo: ann@example.com\r\nSubject: quoted field\r\n\r\nList-Unsubscribe: <mailto:x@news.test>\r\n',
      list: true,
    })
    expect(quoted.status).toBe(200)
  })

  it('a forged, altered or cut link, and a POST without the one-click body, change nothing', async () => {
    expect((await send('bea@example.com', 'bulk bea')).status).toBe(200)
    const path = linkOf(await arrived('bulk bea'))
    const token = path.split('/').pop()!
    const flipped = `${token.slice(0, 30)}${token[30] === 'A' ? 'B' : 'A'}${token.slice(31)}`
    for (const bad of [flipped, token.slice(0, -4), 'A'.repeat(token.length), `${token}x`]) {
      const res = await oneClick(`/unsubscribe/${bad}`)
      expect(res.status).toBe(404)
      expect(await res.text()).toContain('This unsubscribe link is not valid')
      expect((await fetch(`${t.base}/unsubscribe/${bad}`)).status).toBe(404)
    }
    const empty = await oneClick(path, '')
    expect(empty.status).toBe(400)
    expect(await empty.text()).toContain('Nothing was changed')
    expect((await oneClick(path, 'List-Unsubscribe=Other')).status).toBe(400)
    // A multipart body without its boundary is no request either (not an error of the server).
    const broken = await oneClick(path, 'List-Unsubscribe=One-Click', 'multipart/form-data')
    expect(broken.status).toBe(400)
    expect(await broken.text()).toContain('Nothing was changed')
    // A GET (a link scanner, a person's click) only asks.
    const asked = await fetch(`${t.base}${path}`)
    expect(asked.status).toBe(200)
    const page = await asked.text()
    expect(page).toContain('bea@example.com')
    expect(page).toContain('<form method="post">')
    expect(await suppressions()).toEqual([])
    expect(t.endpoint.received.filter((r) => r.event.type === 'recipient.unsubscribed')).toEqual([])
  })

  it('the one-click POST suppresses the recipient once, tells the webhook, and the next send to them is refused', async () => {
    expect((await send('cat@example.com', 'bulk cat')).status).toBe(200)
    const raw = await arrived('bulk cat')
    const path = linkOf(raw)
    const res = await oneClick(path)
    expect(res.status).toBe(200)
    expect(await res.text()).toContain('<strong>cat@example.com</strong> will get no more of this mail')
    // Again, as multipart (RFC 8058 allows both): already done, nothing new.
    const form = new FormData()
    form.set('List-Unsubscribe', 'One-Click')
    expect((await fetch(`${t.base}${path}`, { method: 'POST', body: form })).status).toBe(200)

    expect(await suppressions()).toEqual([
      expect.objectContaining({ address: 'cat@example.com', reason: 'unsubscribed' }),
    ])
    const blocks = await (await api('GET', '/mail/blocks')).json()
    const log = await (await api('GET', '/mail/log?limit=100')).json()
    const txid = log.emails.find((e: { subject: string }) => e.subject === 'bulk cat').id
    expect(blocks.unsubscribed).toEqual([{ date: expect.any(String), to: 'cat@example.com', mailid: txid }])
    // The message's story tells it.
    // (Its 250 is committed a moment after the sink took it.)
    const recipientOf = async () => (await (await api('GET', `/mail/log/${txid}`)).json()).recipients[0]
    await expect.poll(async () => (await recipientOf()).status, { timeout: 10_000 }).toBe('delivered')
    const cat = await recipientOf()
    expect(cat).toMatchObject({ status: 'delivered', suppressed: true })
    expect(cat.timeline.at(-1)).toMatchObject({
      event: 'suppressed',
      response: expect.stringContaining('(unsubscribed)'),
    })
    await expect
      .poll(() => t.endpoint.received.filter((r) => r.event.type === 'recipient.unsubscribed').length, {
        timeout: 10_000,
      })
      .toBe(1)
    const [event] = t.endpoint.received.filter((r) => r.event.type === 'recipient.unsubscribed')
    expect(event.event.data).toEqual({ recipient: 'cat@example.com', transactionId: txid, via: 'one-click' })

    const again = await send('cat@example.com', 'bulk cat again')
    expect(again.status).toBe(400)
    expect(await again.json()).toEqual({
      code: 400,
      message:
        "to: recipient cat@example.com is on this account's local block list (unsubscribed); if it is valid again, delist it with POST /mail/blocks/delete (the delistBlock tool)",
    })
    // Only cat: ann, who got the same kind of mail, still does.
    expect((await send('ann@example.com', 'bulk ann again')).status).toBe(200)
  })

  it("the page's button unsubscribes too, told as `page`", async () => {
    expect((await send('dan@example.com', 'bulk dan')).status).toBe(200)
    const path = linkOf(await arrived('bulk dan'))
    const res = await oneClick(path, 'List-Unsubscribe=One-Click&page=1')
    expect(res.status).toBe(200)
    await expect
      .poll(() => t.endpoint.received.find((r) => r.event.data.recipient === 'dan@example.com')?.event.data.via, {
        timeout: 10_000,
      })
      .toBe('page')
  })

  it('a bulk order sends bulk mail over SMTP: one recipient per message, the others deferred with 452', async () => {
    const order = await (await api('POST', '/orders', { comment: 'letters', list: true })).json()
    expect(order).toMatchObject({ list: true, username: expect.stringMatching(/^mb\d+$/) })
    const transport = nodemailer.createTransport({
      host: '127.0.0.1',
      port: t.server.smtpPort,
      secure: false,
      requireTLS: true,
      auth: { user: order.username, pass: order.password },
      tls: { rejectUnauthorized: false },
    })
    const info = await transport.sendMail({
      from: 'letters@news.test',
      to: ['eve@example.com', 'fay@example.com'],
      subject: 'bulk over smtp',
      text: 'This week.',
    })
    transport.close()
    expect(info.accepted).toEqual(['eve@example.com'])
    expect(info.rejected).toEqual(['fay@example.com'])
    expect(info.rejectedErrors?.[0].message).toMatch(
      /452 4\.5\.3 This mail order sends bulk mail: one recipient per message, each with its own unsubscribe link/,
    )
    const raw = await arrived('bulk over smtp')
    expect(header(raw, 'List-Unsubscribe-Post')).toEqual(['List-Unsubscribe-Post: List-Unsubscribe=One-Click'])
    expect((await fetch(`${t.base}${linkOf(raw)}`)).status).toBe(200)
    expect(t.smtp.user).not.toBe(order.username)
  })
})

describe('bulk mail in the pipeline', () => {
  const message = { recipients: ['ann@example.com'], raw: [Buffer.from('Subject: s\r\n\r\nhi\r\n')] }
  const store = { unsubscribeToken: () => 'token' }

  it('warns once a process of an http:// unsubscribe link, and never of an https:// one', () => {
    for (const [publicUrl, warnings] of [
      ['http://localhost:8080', 1],
      ['https://mail.example.com', 0],
    ] as const) {
      const warned: string[] = []
      const bulk = bulkMail({ store, publicUrl, logger: { warn: (_: unknown, text: string) => warned.push(text) } })
      bulk.check(message)
      bulk.check(message)
      expect(warned, publicUrl).toHaveLength(warnings)
      if (warnings) expect(warned[0]).toMatch(/^bulk mail carries an http:\/\/ unsubscribe link/)
      expect(bulk.headers({ accountId: 1, txid: 't', address: 'ann@example.com' }).toString()).toBe(
        `List-Unsubscribe: <${publicUrl}/unsubscribe/token>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n`,
      )
    }
  })
})
