import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { AppliedPolicy } from '../../relay/mta-sts.js'
import { outboundContext } from '../../relay/mx-certificate.js'
import { MxClient } from '../../relay/mx-client.js'
import type { MxHost } from '../../relay/routes.js'
import type { CachedStsPolicy } from '../../storage/store.js'
import { startSink } from './sink.js'
import { startTestCa, type TestCa } from './test-ca.js'

const cached: CachedStsPolicy = {
  domain: 'example.com',
  id: '1',
  mode: 'enforce',
  mx: ['mx.example.com'],
  maxAge: 86_400,
  text: '',
  fetchedAt: 0,
  expiresAt: 86_400_000,
}
const ENFORCE: AppliedPolicy = { mode: 'enforce', domain: 'example.com', policy: cached }
const TESTING: AppliedPolicy = { mode: 'testing', domain: 'example.com', policy: { ...cached, mode: 'testing' } }

// What a connection's certificate proved travels with it when it is kept for the next message: a
// connection opened without a policy (or under `testing`) never carries mail under `enforce`
// unless its certificate was valid for the MX name.
describe('MxClient under an MTA-STS policy', () => {
  let ca: TestCa
  const cleanup: (() => unknown)[] = []
  beforeAll(async () => {
    ca = await startTestCa()
  })
  afterAll(() => ca.remove())
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup(certificate: { key: string; cert: string }) {
    const sink = await startSink({ tls: certificate })
    cleanup.push(() => sink.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 5_000, secureContext: outboundContext(ca.file) })
    cleanup.push(() => client.close())
    const hosts: MxHost[] = [{ name: 'mx.example.com', port: sink.port, addresses: ['127.0.0.1'] }]
    const deliver = (n: number, policy: AppliedPolicy | null) =>
      client.deliver(
        hosts,
        { from: 's@example.org', to: [`r${n}@example.com`] },
        async () => Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n`),
        undefined,
        policy,
      )
    return { sink, deliver }
  }

  it('reuses a kept connection under enforce when its certificate was valid, counting the session once', async () => {
    const { sink, deliver } = await setup(await ca.issue(['mx.example.com']))
    const first = await deliver(1, ENFORCE)
    expect(first).toMatchObject({
      tls: true,
      certValid: true,
      sessions: [{ mxHost: 'mx.example.com', resultType: 'success' }],
    })
    const second = await deliver(2, ENFORCE)
    expect(second).toMatchObject({ tls: true, certValid: true, sessions: [] })
    expect(sink.state.connections).toBe(1)
    expect(sink.messages).toHaveLength(2)
  })

  it('refuses a kept connection whose certificate was not valid, and a new one, under enforce; testing sends', async () => {
    const { sink, deliver } = await setup(await ca.selfSigned(['mx.example.com']))
    // Without a policy, any certificate does (opportunistic TLS), and the connection is kept.
    expect(await deliver(1, null)).toMatchObject({ tls: true, certValid: false })
    const refused = await deliver(2, ENFORCE)
    expect(refused.replies.get('r2@example.com')).toEqual({
      code: 451,
      response: expect.stringMatching(
        /^4\.7\.5 MTA-STS policy of example\.com \(enforce\): mx\.example\.com \[127\.0\.0\.1\] presented a certificate no trusted CA issued \(\w+\)$/,
      ),
    })
    expect(refused).toMatchObject({
      certValid: false,
      sessions: [{ mxHost: 'mx.example.com', resultType: 'certificate-not-trusted' }],
    })
    expect(sink.messages.map((m) => m.to)).toEqual([['r1@example.com']])
    const tested = await deliver(3, TESTING)
    expect(tested.replies.get('r3@example.com')).toMatchObject({ code: 250 })
    expect(tested).toMatchObject({ certValid: false, sessions: [{ resultType: 'certificate-not-trusted' }] })
  })

  it.each([
    ['a wildcard for the whole left-most label', ['*.example.com'], true],
    ['a wildcard for another level', ['*.mail.example.com'], false],
    ['the name only as its subject CN (RFC 8461 §4.2: DNS-ID only)', ['mx.example.com', 'cn'], false],
  ])('takes a certificate with %s as %s', async (_, names, valid) => {
    const cnOnly = names[1] === 'cn'
    const { sink, deliver } = await setup(await ca.issue(names.slice(0, cnOnly ? 1 : undefined), { cnOnly }))
    const attempt = await deliver(1, ENFORCE)
    expect(attempt.certValid).toBe(valid)
    expect(sink.messages).toHaveLength(valid ? 1 : 0)
  })

  it('refuses a MAILROOM_OUTBOUND_CA that cannot be read or is no certificate, naming the setting', () => {
    expect(() => outboundContext('/nonexistent/ca.pem')).toThrow(
      /^cannot use \/nonexistent\/ca\.pem as a CA \(MAILROOM_OUTBOUND_CA\): ENOENT/,
    )
    expect(outboundContext(null)).toBeUndefined()
    expect(outboundContext(ca.file)).toBeDefined()
  })

  it('names an expired certificate as such', async () => {
    const { deliver } = await setup(await ca.issue(['mx.example.com'], { expired: true }))
    const refused = await deliver(1, ENFORCE)
    expect(refused.replies.get('r1@example.com')?.response).toBe(
      '4.7.5 MTA-STS policy of example.com (enforce): mx.example.com [127.0.0.1] presented an expired certificate',
    )
    expect(refused.sessions).toEqual([{ mxHost: 'mx.example.com', resultType: 'certificate-expired' }])
  })
})
