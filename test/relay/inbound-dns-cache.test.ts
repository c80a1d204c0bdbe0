import { describe, expect, it } from 'vitest'
import { cachedResolve, DNS_CACHE } from '../../relay/inbound/dns-cache.js'

/** A resolver that counts its lookups and answers from `records`; a name it lacks is ENOTFOUND, `fail` a timeout. */
function counting(records: Record<string, string[][]>, fail = new Set<string>()) {
  const asked: string[] = []
  const resolve = async (name: string, rrtype: string) => {
    asked.push(`${rrtype} ${name}`)
    if (fail.has(name)) throw Object.assign(new Error(`queryTxt ETIMEOUT ${name}`), { code: 'ETIMEOUT' })
    const answer = records[name]
    if (!answer) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
    return answer
  }
  return { asked, resolve }
}

const SPF = [['v=spf1 ip4:127.0.0.1 -all']]

describe('cachedResolve', () => {
  it('looks a record up once while it is kept, and again once its minute is over', async () => {
    let now = 0
    const dns = counting({ 'sender.test': SPF })
    const resolve = cachedResolve(dns.resolve, { clock: () => now })
    expect(await resolve('sender.test', 'TXT')).toEqual(SPF)
    now += DNS_CACHE.ttlMs - 1
    expect(await resolve('Sender.TEST', 'TXT')).toEqual(SPF)
    expect(dns.asked).toEqual(['TXT sender.test'])
    now += 1
    expect(await resolve('sender.test', 'TXT')).toEqual(SPF)
    expect(dns.asked).toEqual(['TXT sender.test', 'TXT sender.test'])
  })

  it('shares one lookup between the messages that ask at the same time, by name and type', async () => {
    const dns = counting({ 'sender.test': SPF })
    const resolve = cachedResolve(dns.resolve)
    const answers = await Promise.all([
      resolve('sender.test', 'TXT'),
      resolve('sender.test', 'TXT'),
      resolve('sender.test', 'MX'),
    ])
    expect(answers).toEqual([SPF, SPF, SPF])
    expect(dns.asked).toEqual(['TXT sender.test', 'MX sender.test'])
  })

  it('keeps "no such record" a few seconds only', async () => {
    let now = 0
    const records: Record<string, string[][]> = {}
    const dns = counting(records)
    const resolve = cachedResolve(dns.resolve, { clock: () => now })
    await expect(resolve('_dmarc.new.test', 'TXT')).rejects.toMatchObject({ code: 'ENOTFOUND' })
    await expect(resolve('_dmarc.new.test', 'TXT')).rejects.toMatchObject({ code: 'ENOTFOUND' })
    expect(dns.asked).toHaveLength(1)
    records['_dmarc.new.test'] = [['v=DMARC1; p=reject']]
    now += DNS_CACHE.negativeTtlMs
    expect(await resolve('_dmarc.new.test', 'TXT')).toEqual([['v=DMARC1; p=reject']])
    expect(dns.asked).toHaveLength(2)
  })

  it('never keeps a temporary failure: the next message asks again', async () => {
    const fail = new Set(['slow.test'])
    const dns = counting({ 'slow.test': SPF }, fail)
    const resolve = cachedResolve(dns.resolve)
    await expect(resolve('slow.test', 'TXT')).rejects.toMatchObject({ code: 'ETIMEOUT' })
    fail.clear()
    expect(await resolve('slow.test', 'TXT')).toEqual(SPF)
    expect(dns.asked).toHaveLength(2)
  })

  it('keeps at most maxEntries answers, letting the oldest go', async () => {
    const dns = counting({ 'a.test': SPF, 'b.test': SPF, 'c.test': SPF })
    const resolve = cachedResolve(dns.resolve, { limits: { ...DNS_CACHE, maxEntries: 2 } })
    for (const name of ['a.test', 'b.test', 'c.test', 'c.test', 'b.test']) await resolve(name, 'TXT')
    expect(dns.asked).toEqual(['TXT a.test', 'TXT b.test', 'TXT c.test'])
    await resolve('a.test', 'TXT')
    expect(dns.asked).toEqual(['TXT a.test', 'TXT b.test', 'TXT c.test', 'TXT a.test'])
  })
})
