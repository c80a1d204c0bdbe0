import { afterAll, beforeAll, expect, it } from 'vitest'
import { authResolver, dmarcRejects, verifyInbound } from '../../relay/inbound/verify.js'
import { DNSMASQ, describeWith } from '../system/peers.js'
import { senderMessage, startSenderDns } from './inbound-support.js'
import { existsSync } from 'node:fs'

describeWith('verifyInbound', 'dnsmasq', existsSync(DNSMASQ) ? undefined : `${DNSMASQ} is missing`, () => {
  let dns: Awaited<ReturnType<typeof startSenderDns>>
  let resolver: ReturnType<typeof authResolver>
  beforeAll(async () => {
    dns = await startSenderDns()
    resolver = authResolver([dns.server])
  })
  afterAll(() => dns?.stop())

  const verify = (raw: string, remoteAddress = '127.0.0.1', mailFrom = 'boss@sender.test') =>
    verifyInbound({
      raw: Buffer.from(raw),
      mailFrom,
      remoteAddress,
      heloName: 'mail.sender.test',
      resolver,
      hostname: 'mx.acme.test',
    })

  it('passes a message signed with the key the domain publishes, sent from an address its SPF names', async () => {
    const verdict = await verify(await dns.signed(senderMessage()))
    expect(verdict).toMatchObject({
      spf: { result: 'pass', domain: 'sender.test' },
      dkim: [{ result: 'pass', domain: 'sender.test', selector: 's1' }],
      dmarc: { result: 'pass', policy: 'reject', domain: 'sender.test' },
      arc: { result: 'none' },
    })
    expect(verdict.header).toMatch(/^mx\.acme\.test;/)
    expect(verdict.header).toMatch(/dkim=pass header\.i=@sender\.test header\.s=s1/)
    expect(verdict.header).toMatch(/spf=pass .*smtp\.mailfrom=.*sender\.test/)
    expect(verdict.header).toMatch(/dmarc=pass/)
    expect(dmarcRejects(verdict)).toBe(false)
  })

  it('fails the signature of a message altered after it was signed', async () => {
    const altered = (await dns.signed(senderMessage())).replace('Subject: the quote', 'Subject: pay this invoice')
    const verdict = await verify(altered)
    expect(verdict.dkim).toMatchObject([{ result: 'fail', domain: 'sender.test', selector: 's1' }])
    expect(verdict.header).toMatch(/dkim=fail/)
    // SPF still aligns with the From domain, so DMARC passes: the sender's own address sent it.
    expect(verdict.dmarc.result).toBe('pass')
  })

  it('does not pass a signature whose body was changed', async () => {
    const altered = (await dns.signed(senderMessage())).replace('Please send', 'Please wire money for')
    const verdict = await verify(altered)
    expect(verdict.dkim).toHaveLength(1)
    expect(verdict.dkim[0].result).not.toBe('pass')
  })

  it('fails SPF for an address the domain does not name', async () => {
    const verdict = await verify(await dns.signed(senderMessage()), '127.0.0.9')
    expect(verdict.spf).toEqual({ result: 'fail', domain: 'sender.test' })
    expect(verdict.header).toMatch(/spf=fail/)
    // The signature still passes and aligns: DMARC passes.
    expect(verdict.dmarc.result).toBe('pass')
    expect(dmarcRejects(verdict)).toBe(false)
  })

  it('says DMARC asks to reject a forged From under p=reject', async () => {
    const verdict = await verify(senderMessage(), '127.0.0.9', 'someone@elsewhere.test')
    expect(verdict.dkim).toEqual([])
    expect(verdict.dmarc).toEqual({ result: 'fail', policy: 'reject', domain: 'sender.test' })
    expect(verdict.header).toMatch(/dmarc=fail/)
    expect(dmarcRejects(verdict)).toBe(true)
  })

  it('does not ask to reject a DMARC failure under p=none', async () => {
    const verdict = await verify(senderMessage('boss@lenient.test'), '127.0.0.9', 'boss@lenient.test')
    expect(verdict.dmarc).toEqual({ result: 'fail', policy: 'none', domain: 'lenient.test' })
    expect(dmarcRejects(verdict)).toBe(false)
  })

  it('gives none where a domain publishes nothing', async () => {
    const verdict = await verify(senderMessage('a@nothing.test'), '127.0.0.1', 'a@nothing.test')
    expect(verdict).toMatchObject({
      spf: { result: 'none', domain: 'nothing.test' },
      dkim: [],
      dmarc: { result: 'none' },
    })
    expect(dmarcRejects(verdict)).toBe(false)
  })
})
