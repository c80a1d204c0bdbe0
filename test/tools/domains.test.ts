import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { generateDkimKey } from '../../relay/dkim.js'
import { checkDomain } from '../../tools/check-domain.js'
import { getDomains } from '../../tools/get-domains.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { startDnsmasq } from '../system/peers.js'
import { expectRefused, expectSchemaRefusal, run } from './support.js'

const DOMAIN = 'inside.test'

// The sending domains of an account and their DNS records, looked up at a real DNS server
// (dnsmasq) that publishes the DKIM and SPF records of the signing key, and no DMARC record.
describe('getDomains and checkDomain', () => {
  const key = generateDkimKey('ed25519')
  let dns: Awaited<ReturnType<typeof startDnsmasq>>
  let env: TestEnv
  beforeAll(async () => {
    dns = await startDnsmasq([
      `--txt-record=mr-a._domainkey.${DOMAIN},v=DKIM1; k=ed25519; p=${key.publicKey}`,
      `--txt-record=${DOMAIN},v=spf1 a:relay.inside.test ~all`,
    ])
  })
  afterAll(() => dns?.stop())
  beforeEach(async () => {
    env = await createTestEnv({ MAILROOM_DNS_SERVERS: dns.server, MAILROOM_NODE_NAME: 'relay.inside.test' })
    const addKey = (selector: string, keys: { privateKey: string; publicKey: string }, now: number) =>
      env.services.store.domains.addKey({
        domain: DOMAIN,
        accountId: env.accountId,
        selector,
        algorithm: 'ed25519',
        ...keys,
        now,
      })
    await addKey('mr-a', key, env.clock())
    await addKey('mr-b', generateDkimKey('ed25519'), env.clock() + 1000)
  })
  afterEach(() => env.close())

  it('lists the domains with their keys, the oldest signing, and the records to publish', async () => {
    const [listed] = await run(getDomains, {}, env.ctx)
    expect(listed.keys).toEqual([
      { selector: 'mr-a', algorithm: 'ed25519', signing: true, created: '2026-11-22 12:00:00' },
      { selector: 'mr-b', algorithm: 'ed25519', signing: false, created: '2026-11-22 12:00:01' },
    ])
    expect(listed.records.map((r) => [r.type, r.name])).toEqual([
      ['TXT', `mr-a._domainkey.${DOMAIN}`],
      ['TXT', `mr-b._domainkey.${DOMAIN}`],
      ['TXT', DOMAIN],
      ['TXT', `_dmarc.${DOMAIN}`],
    ])
    expect(listed.records[0].value).toBe(`v=DKIM1; k=ed25519; p=${key.publicKey}`)
    expect(listed.records[2].value).toBe('v=spf1 a:relay.inside.test ~all')
  })

  it('says of each record whether it is published and matches', async () => {
    const checked = await run(checkDomain, { domain: 'Inside.Test.' }, env.ctx)
    expect(checked.domain).toBe(DOMAIN)
    expect(checked.ok).toBe(false)
    expect(checked.records.map((r) => [r.name, r.published, r.matches])).toEqual([
      [`mr-a._domainkey.${DOMAIN}`, true, true],
      [`mr-b._domainkey.${DOMAIN}`, false, false],
      [DOMAIN, true, true],
      [`_dmarc.${DOMAIN}`, false, false],
    ])
    expect(checked.records[2].found).toEqual(['v=spf1 a:relay.inside.test ~all'])
  })

  it("answers another account's domain, and one nobody has, as not a sending domain; refuses a non-domain", async () => {
    const other = await env.newAccount()
    expect(await run(getDomains, {}, other.ctx)).toEqual([])
    await expectRefused(
      run(checkDomain, { domain: DOMAIN }, other.ctx),
      404,
      `domain: ${DOMAIN} is not a sending domain`,
    )
    await expectRefused(
      run(checkDomain, { domain: 'nobody.test' }, env.ctx),
      404,
      'nobody.test is not a sending domain',
    )
    expectSchemaRefusal(checkDomain, { domain: 'not a domain' }, 'domain')
  })
})
