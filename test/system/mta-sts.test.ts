import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'
import { simpleParser } from 'mailparser'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { DeliveryWorker } from '../../relay/delivery.js'
import { createResolver } from '../../relay/routes.js'
import { DAY_MS, type RecipientHistory } from '../../storage/store.js'
import { createTestEnv } from '../helpers.js'
import { startSink } from '../relay/sink.js'
import { startTestCa, type TestCa } from '../relay/test-ca.js'
import { relayTo } from '../relay/worker-relay.js'
import { startDnsmasq } from './peers.js'

// Outbound TLS policy against real outside parts: the recipient domains' DNS is a dnsmasq on
// loopback, their MTA-STS policy host an HTTPS server on loopback, their MX an SMTP server with a
// certificate from a CA of the test's own (MAILROOM_OUTBOUND_CA).

/** The policy each domain publishes (its _mta-sts record and its policy file). */
const POLICIES: Record<string, string> = {
  'badcert.test': 'version: STSv1\r\nmode: enforce\r\nmx: mx.badcert.test\r\nmax_age: 86400\r\n',
  'goodcert.test': 'version: STSv1\r\nmode: enforce\r\nmx: *.goodcert.test\r\nmax_age: 86400\r\n',
  'testing.test': 'version: STSv1\r\nmode: testing\r\nmx: mx.testing.test\r\nmax_age: 86400\r\n',
  'unlisted.test': 'version: STSv1\r\nmode: enforce\r\nmx: mx.elsewhere.test\r\nmax_age: 86400\r\n',
}
/** Every domain's MX is on loopback, where the test's sink listens; reports.test takes the TLS reports. */
const DOMAINS = [...Object.keys(POLICIES), 'reports.test']

const records = () =>
  DOMAINS.flatMap((d) => [
    `--mx-host=${d},mx.${d},10`,
    `--host-record=mx.${d},127.0.0.1`,
    ...(POLICIES[d]
      ? [
          `--host-record=mta-sts.${d},127.0.0.1`,
          `--txt-record=_mta-sts.${d},v=STSv1; id=20261122`,
          `--txt-record=_smtp._tls.${d},v=TLSRPTv1; rua=mailto:tls@reports.test`,
        ]
      : []),
  ])

describe('system: MTA-STS and TLS reports', () => {
  let ca: TestCa
  let dns: Awaited<ReturnType<typeof startDnsmasq>>
  let policyHost: Server
  const cleanup: (() => unknown)[] = []
  beforeAll(async () => {
    ca = await startTestCa()
    dns = await startDnsmasq(records())
    policyHost = createServer(await ca.issue(Object.keys(POLICIES).map((d) => `mta-sts.${d}`)), (req, res) => {
      const domain = (req.headers.host ?? '').replace(/^mta-sts\.|:\d+$/g, '')
      const policy = req.url === '/.well-known/mta-sts.txt' ? POLICIES[domain] : undefined
      res.writeHead(policy ? 200 : 404, { 'content-type': 'text/plain' }).end(policy ?? 'no such policy')
    })
    await new Promise<void>((r) => policyHost.listen(0, '127.0.0.1', r))
  }, 60_000)
  afterAll(async () => {
    dns?.stop()
    policyHost?.closeAllConnections()
    await new Promise((r) => policyHost?.close(r))
    ca?.remove()
  })
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  /** A delivery worker whose MX (every domain's) presents a certificate for `names`; with none, offers no STARTTLS. */
  async function setup(names: string[]) {
    const sink = await startSink(names.length ? { tls: await ca.issue(names) } : {})
    cleanup.push(() => sink.close())
    const env = await createTestEnv({
      MAILROOM_MX_PORT: String(sink.port),
      MAILROOM_ALLOW_PRIVATE_MX: 'true',
      // The policy hosts are on loopback: allowed as for webhooks.
      MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true',
      MAILROOM_OUTBOUND_CA: ca.file,
      MAILROOM_TLS_REPORTS_ORDER: 'mb1',
      MAILROOM_TLS_REPORTS_FROM: 'tlsrpt@relay.test',
      MAILROOM_RETRY_SCHEDULE: '5m',
      MAILROOM_DELIVERY_TIMEOUT: '10s',
    })
    cleanup.push(() => env.close())
    expect(env.orderId).toBe(1)
    const worker = new DeliveryWorker({
      ...env.services,
      resolver: createResolver([dns.server]),
      policyPort: (policyHost.address() as AddressInfo).port,
    })
    cleanup.push(() => worker.stop())
    await worker.start()
    const { send: sendTo } = relayTo(env, worker, 'policy test')
    const send = (to: string) => sendTo([to])
    /** The recipient's story once it has had an attempt. */
    const attempted = async (txid: string): Promise<RecipientHistory> => {
      let story: RecipientHistory | undefined
      await expect
        .poll(
          async () => {
            story = (await env.services.store.mail.message(txid, env.accountId))?.recipients[0]
            return story?.attempts
          },
          { timeout: 30_000, interval: 100 },
        )
        .toBe(1)
      return story!
    }
    return { sink, env, worker, send, attempted }
  }

  it('defers mail to an enforce domain whose MX presents a certificate for another name, saying why', async () => {
    const t = await setup(['other.example.test'])
    const story = await t.attempted(await t.send('bob@badcert.test'))
    expect(story.state).toBe('deferred')
    expect(story.history).toEqual([
      expect.objectContaining({
        state: 'deferred',
        code: 451,
        response:
          '4.7.5 MTA-STS policy of badcert.test (enforce): mx.badcert.test [127.0.0.1] presented a certificate for other.example.test',
        mxHostname: 'mx.badcert.test',
        tls: true,
        tlsPolicy: 'enforce',
        tlsPolicyDomain: 'badcert.test',
        certValid: false,
      }),
    ])
    expect(t.sink.messages).toEqual([])
  })

  it('delivers to the same enforce policy when the MX certificate is valid for its name (the test CA)', async () => {
    const t = await setup(['mx.goodcert.test'])
    const story = await t.attempted(await t.send('bob@goodcert.test'))
    expect(story.history).toEqual([
      expect.objectContaining({
        state: 'delivered',
        code: 250,
        tls: true,
        tlsPolicy: 'enforce',
        tlsPolicyDomain: 'goodcert.test',
        certValid: true,
      }),
    ])
    expect(t.sink.messages.map((m) => [m.to, m.secure])).toEqual([[['bob@goodcert.test'], true]])
  })

  it('defers mail to an enforce domain whose MX does not offer STARTTLS: nothing goes in clear', async () => {
    const t = await setup([])
    const story = await t.attempted(await t.send('bob@goodcert.test'))
    expect(story.history).toEqual([
      expect.objectContaining({
        state: 'deferred',
        response:
          '4.7.5 MTA-STS policy of goodcert.test (enforce): mx.goodcert.test [127.0.0.1] did not offer STARTTLS',
        tls: false,
        tlsPolicy: 'enforce',
        certValid: null,
      }),
    ])
    expect(t.sink.messages).toEqual([])
  })

  it('defers mail to an enforce domain whose MX hosts are not in its policy, without connecting', async () => {
    const t = await setup(['mx.unlisted.test'])
    const story = await t.attempted(await t.send('bob@unlisted.test'))
    expect(story.history).toEqual([
      expect.objectContaining({
        state: 'deferred',
        code: 451,
        response:
          '4.7.5 MTA-STS policy of unlisted.test (enforce): no MX host of unlisted.test is listed in the policy (mx.unlisted.test not in mx: mx.elsewhere.test)',
        mxAddress: null,
        tlsPolicy: 'enforce',
        certValid: null,
      }),
    ])
    expect(t.sink.state.connections).toBe(0)
  })

  it('delivers under a testing policy, counts the failure, and mails the TLS report the next day as RFC 8460 JSON', async () => {
    const t = await setup(['other.example.test'])
    const txid = await t.send('bob@testing.test')
    const story = await t.attempted(txid)
    expect(story.history).toEqual([
      expect.objectContaining({
        state: 'delivered',
        tlsPolicy: 'testing',
        tlsPolicyDomain: 'testing.test',
        certValid: false,
      }),
    ])
    // The same day, no report is due.
    expect(await t.worker.tlsReports.run()).toBe(0)
    const day = Math.floor(t.env.clock() / DAY_MS) * DAY_MS
    t.env.clock.advance(DAY_MS)
    expect(await t.worker.tlsReports.run()).toBe(1)
    // Once: a second run (another node's) finds it claimed.
    expect(await t.worker.tlsReports.run()).toBe(0)
    await expect.poll(() => t.sink.messages.length, { timeout: 30_000, interval: 100 }).toBe(2)
    const sunk = t.sink.messages[1]
    expect([sunk.from, sunk.to]).toEqual(['tlsrpt@relay.test', ['tls@reports.test']])
    const mail = await simpleParser(sunk.raw)
    expect(mail.headers.get('content-type')).toMatchObject({
      value: 'multipart/report',
      params: { 'report-type': 'tlsrpt' },
    })
    expect(mail.headers.get('tls-report-domain')).toBe('testing.test')
    expect(mail.headers.get('tls-report-submitter')).toBe('relay.test')
    expect(mail.subject).toMatch(/^Report Domain: testing\.test Submitter: relay\.test Report-ID: <.+@relay\.test>$/)
    const [attachment] = mail.attachments
    expect(attachment.contentType).toBe('application/tlsrpt+gzip')
    expect(attachment.filename).toMatch(
      new RegExp(`^relay\\.test!testing\\.test!${day / 1000}!${(day + DAY_MS) / 1000}!.+\\.json\\.gz$`),
    )
    const report = JSON.parse(gunzipSync(attachment.content).toString('utf8'))
    const iso = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`
    expect(report).toEqual({
      'organization-name': 'relay.test',
      'date-range': { 'start-datetime': iso(day), 'end-datetime': iso(day + DAY_MS - 1000) },
      'contact-info': 'tlsrpt@relay.test',
      'report-id': expect.stringMatching(/@relay\.test$/),
      policies: [
        {
          policy: {
            'policy-type': 'sts',
            'policy-string': ['version: STSv1', 'mode: testing', 'mx: mx.testing.test', 'max_age: 86400'],
            'policy-domain': 'testing.test',
            'mx-host': ['mx.testing.test'],
          },
          summary: { 'total-successful-session-count': 0, 'total-failure-session-count': 1 },
          'failure-details': [
            {
              'result-type': 'certificate-host-mismatch',
              'receiving-mx-hostname': 'mx.testing.test',
              'failed-session-count': 1,
            },
          ],
        },
      ],
    })
  })
})
