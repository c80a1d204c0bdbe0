import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { fetchPolicyFile, MAX_POLICY_BYTES, PolicyFetchError, StsPolicies } from '../../relay/mta-sts.js'
import { outboundContext } from '../../relay/mx-certificate.js'
import type { MxResolver } from '../../relay/routes.js'
import { openSqliteStore } from '../../storage/sqlite/index.js'
import { silentLogger } from '../helpers.js'
import { stubResolver } from './sink.js'
import { startTestCa, type TestCa } from './test-ca.js'
import { randomBytes } from 'node:crypto'

const POLICY = 'version: STSv1\r\nmode: enforce\r\nmx: mx.b.test\r\nmx: *.mail.b.test\r\nmax_age: 86400\r\n'

/** The DNS of b.test: its policy host on loopback, and `_mta-sts` TXT records as given (none when empty). */
const dnsOf = (txt: () => string[]): MxResolver => ({
  ...stubResolver({ a: { 'mta-sts.b.test': ['127.0.0.1'] } }),
  resolveTxt: async (name) => {
    const records = name === '_mta-sts.b.test' ? txt() : []
    if (!records.length) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
    return records.map((r) => [r])
  },
})

describe('MTA-STS policies', () => {
  let ca: TestCa
  let server: Server
  let port: number
  /** How the policy host answers the next requests. */
  let answer: (req: IncomingMessage, res: ServerResponse) => void
  let requests = 0
  beforeAll(async () => {
    ca = await startTestCa()
    server = createServer(await ca.issue(['mta-sts.b.test']), (req, res) => {
      requests++
      answer(req, res)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as AddressInfo).port
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
    ca.remove()
  })
  afterEach(() => {
    requests = 0
    server.closeAllConnections()
  })

  const serve = (text: string, status = 200, headers: Record<string, string> = {}) =>
    (answer = (_req, res) => {
      res.writeHead(status, { 'content-type': 'text/plain', ...headers })
      res.end(text)
    })
  const fetch = (options: { allowPrivate?: boolean; fetchTimeout?: number; trusted?: boolean } = {}) =>
    fetchPolicyFile('b.test', {
      resolver: dnsOf(() => []),
      allowPrivate: options.allowPrivate ?? true,
      secureContext: options.trusted === false ? undefined : outboundContext(ca.file),
      port,
      fetchTimeout: options.fetchTimeout,
    })
  const failure = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(PolicyFetchError)
    return { resultType: (err as PolicyFetchError).resultType, message: (err as Error).message }
  }

  it('fetches the policy file over HTTPS from the policy host, its certificate checked', async () => {
    let path = ''
    answer = (req, res) => {
      path = `${req.headers.host} ${req.url}`
      res.writeHead(200, { 'content-type': 'text/plain' }).end(POLICY)
    }
    expect(await fetch()).toBe(POLICY)
    expect(path).toBe(`mta-sts.b.test:${port} /.well-known/mta-sts.txt`)
    // Without the test CA, the policy host's certificate is not trusted.
    expect(await failure(fetch({ trusted: false }))).toMatchObject({ resultType: 'sts-webpki-invalid' })
  })

  it("checks the policy host's name as an MX's: a subjectAltName, never the CN, no partial wildcard (RFC 8461 §3.3)", async () => {
    serve(POLICY)
    try {
      for (const cert of [await ca.issue(['mta-sts.b.test'], { cnOnly: true }), await ca.issue(['m*.b.test'])]) {
        server.setSecureContext(cert)
        server.closeAllConnections()
        expect((await failure(fetch())).message).toContain('the certificate is not for mta-sts.b.test')
      }
    } finally {
      server.setSecureContext(await ca.issue(['mta-sts.b.test']))
      server.closeAllConnections()
    }
    expect(await fetch()).toBe(POLICY)
  })

  it('refuses a redirect, any status but 200, a body past 64 KB and a host that stalls', async () => {
    serve('', 301, { location: 'https://elsewhere.test/' })
    expect(await failure(fetch())).toEqual({
      resultType: 'sts-policy-fetch-error',
      message: 'mta-sts.b.test: answered HTTP 301 (a redirect, which is not followed)',
    })
    serve('not here', 404)
    expect((await failure(fetch())).message).toBe('mta-sts.b.test: answered HTTP 404')
    // A flood: cut off once past the limit, never read whole.
    let written = 0
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const chunk = Buffer.alloc(16 * 1024, 'a')
      const pump = () => {
        while (written < 100 * MAX_POLICY_BYTES && !res.destroyed) {
          written += chunk.length
          if (!res.write(chunk)) return void res.once('drain', pump)
        }
        res.end()
      }
      res.on('error', () => {})
      pump()
    }
    expect((await failure(fetch())).message).toBe('mta-sts.b.test: the policy file is larger than 64 KB')
    expect(written).toBeLessThan(100 * MAX_POLICY_BYTES)
    // Headers, then nothing.
    answer = (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).write('version: STSv1\r\n')
    expect((await failure(fetch({ fetchTimeout: 1000 }))).message).toBe('mta-sts.b.test: no policy within 1 s')
  })

  it("refuses a policy host at a private address unless private addresses are allowed (webhooks' rule)", async () => {
    serve(POLICY)
    expect(await failure(fetch({ allowPrivate: false }))).toEqual({
      resultType: 'sts-policy-fetch-error',
      message:
        'mta-sts.b.test: mta-sts.b.test resolves only to 127.0.0.1, a loopback address: not sent (MAILROOM_ALLOW_PRIVATE_WEBHOOKS)',
    })
    expect(requests).toBe(0)
  })

  describe('as delivery looks them up', () => {
    const open = () => openSqliteStore({ file: ':memory:', secret: randomBytes(32) })
    let now = Date.UTC(2026, 10, 28, 12)
    const policies = (store: ReturnType<typeof open>, txt: () => string[], failed: string[] = []) =>
      new StsPolicies({
        store,
        resolver: dnsOf(txt),
        logger: silentLogger,
        clock: () => now,
        allowPrivate: true,
        secureContext: outboundContext(ca.file),
        port,
        failed: (domain, resultType) => failed.push(`${domain} ${resultType}`),
      })

    it('applies a fetched policy, keeps it for its max_age, and fetches again only when the TXT id changes', async () => {
      const store = open()
      let txt = ['v=STSv1; id=one']
      serve(POLICY)
      const applied = await policies(store, () => txt).lookUp('B.test')
      expect(applied).toMatchObject({
        mode: 'enforce',
        domain: 'b.test',
        policy: { mx: ['mx.b.test', '*.mail.b.test'] },
      })
      expect(await store.tlsPolicy.policy('b.test')).toMatchObject({ id: 'one', maxAge: 86_400, text: POLICY })
      // Another node (a new lookup, the same store): the same id needs no fetch.
      now += 3_600_000
      expect(await policies(store, () => txt).lookUp('b.test')).toMatchObject({ mode: 'enforce' })
      expect(requests).toBe(1)
      // A new id: fetched again, and the new policy applies.
      txt = ['v=STSv1; id=two']
      serve(POLICY.replace('enforce', 'testing'))
      expect(await policies(store, () => txt).lookUp('b.test')).toMatchObject({ mode: 'testing' })
      expect(requests).toBe(2)
      await store.close()
    })

    it('keeps applying an unexpired policy when the TXT record goes or the fetch fails (RFC 8461 §5.1), not after', async () => {
      const store = open()
      serve(POLICY)
      await policies(store, () => ['v=STSv1; id=one']).lookUp('b.test')
      // The record is gone (a flapping or stripped TXT record): the cached policy still applies.
      expect(await policies(store, () => []).lookUp('b.test')).toMatchObject({ mode: 'enforce' })
      // A new id whose policy cannot be fetched: the cached one applies, the failure is told.
      const failed: string[] = []
      serve('garbage', 200)
      expect(await policies(store, () => ['v=STSv1; id=two'], failed).lookUp('b.test')).toMatchObject({
        mode: 'enforce',
      })
      expect(failed).toEqual(['b.test sts-policy-invalid'])
      // Once expired, a policy that cannot be fetched is none.
      now += 2 * 86_400_000
      expect(await policies(store, () => ['v=STSv1; id=two'], failed).lookUp('b.test')).toEqual({
        mode: 'none',
        domain: 'b.test',
      })
      await store.close()
    })

    it('plans the hosts a delivery may use: under enforce the listed ones, under testing all', async () => {
      const store = open()
      const failed: string[] = []
      const host = (name: string) => ({ name, addresses: ['127.0.0.1'], port: 25 })
      const hosts = [host('mx.b.test'), host('mx9.elsewhere.test'), host('a.mail.b.test'), host('a.b.mail.b.test')]
      serve(POLICY)
      expect(await policies(store, () => ['v=STSv1; id=one'], failed).plan('b.test', hosts)).toMatchObject({
        policy: { mode: 'enforce' },
        hosts: [host('mx.b.test'), host('a.mail.b.test')],
      })
      expect(failed).toEqual(['b.test validation-failure', 'b.test validation-failure'])
      expect(await policies(store, () => ['v=STSv1; id=one']).plan('b.test', [host('mx.other.test')])).toEqual({
        policy: expect.objectContaining({ mode: 'enforce' }),
        refusal:
          '4.7.5 MTA-STS policy of b.test (enforce): no MX host of b.test is listed in the policy (mx.other.test not in mx: mx.b.test, *.mail.b.test)',
      })
      serve(POLICY.replace('enforce', 'testing'))
      expect(await policies(store, () => ['v=STSv1; id=two']).plan('b.test', hosts)).toMatchObject({
        policy: { mode: 'testing' },
        hosts,
        unlisted: ['mx9.elsewhere.test', 'a.b.mail.b.test'],
      })
      await store.close()
    })

    it('has no policy for a domain without a record, nor for one with two', async () => {
      const store = open()
      serve(POLICY)
      expect(await policies(store, () => []).lookUp('b.test')).toEqual({ mode: 'none', domain: 'b.test' })
      expect(await policies(store, () => ['v=STSv1; id=a', 'v=STSv1; id=b']).lookUp('b.test')).toMatchObject({
        mode: 'none',
      })
      expect(requests).toBe(0)
      await store.close()
    })
  })
})
