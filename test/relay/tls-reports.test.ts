import { afterEach, describe, expect, it } from 'vitest'
import type { MxResolver } from '../../relay/routes.js'
import { REPORT_DELAY_MS, TlsReports } from '../../relay/tls-reports.js'
import { createTxidGenerator } from '../../relay/txid.js'
import { DAY_MS } from '../../storage/store.js'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { stubResolver } from './sink.js'

/** The TLS-RPT records of the test's domains, as given. */
const dnsOf = (txt: Record<string, string[]>): MxResolver => ({
  ...stubResolver({}),
  resolveTxt: async (name) => {
    if (!txt[name]) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
    return txt[name].map((r) => [r])
  },
})

describe('TLS reports', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup(
    txt: Record<string, string[]>,
    env: Record<string, string> = { MAILROOM_TLS_REPORTS_ORDER: 'mb1' },
  ) {
    const t: TestEnv = await createTestEnv({ MAILROOM_NODE_NAME: 'relay.test', ...env })
    cleanup.push(() => t.close())
    let queued = 0
    const reporter = (node: string) =>
      new TlsReports({
        ...t.services,
        resolver: dnsOf(txt),
        node,
        newTxid: createTxidGenerator(),
        queued: () => queued++,
      })
    /** The reports queued so far: their envelopes and subjects. */
    const reports = async () =>
      (
        await t.services.store.mail.log({
          orderId: t.orderId,
          skip: 0,
          limit: 100,
          dir: 'asc',
          groupby: 'message',
        })
      ).rows.map((r) => ({ from: r.from, to: r.to, subject: r.subject }))
    return { t, reporter, reports, queued: () => queued }
  }

  it('mails a day once, to the mailto: addresses of the rua only, whichever node runs first', async () => {
    const { t, reporter, reports, queued } = await setup({
      '_smtp._tls.b.test': ['v=TLSRPTv1;rua=mailto:a@r.test, https://r.test/rpt,mailto:b@r.test?subject=x'],
    })
    const [one, two] = [reporter('node-a'), reporter('node-b')]
    one.count('b.test', 'sts', 'success', 'mx.b.test')
    two.count('b.test', 'sts', 'certificate-expired', 'mx.b.test')
    await Promise.all([one.flush(), two.flush()])
    // Not before the day has ended, and REPORT_DELAY_MS after.
    t.clock.set(Math.ceil(t.clock() / DAY_MS) * DAY_MS + REPORT_DELAY_MS - 1000)
    expect(await one.run()).toBe(0)
    t.clock.advance(1000)
    expect((await Promise.all([one.run(), two.run()])).sort()).toEqual([0, 1])
    expect(await reports()).toEqual([
      {
        from: 'tlsrpt-noreply@relay.test',
        to: 'a@r.test,b@r.test',
        subject: expect.stringMatching(/^Report Domain: b\.test Submitter: relay\.test Report-ID: </),
      },
    ])
    expect(queued()).toBe(1)
  })

  it('sends nothing to a domain without one TLS-RPT record with a mailto: rua, and counts nothing without an order', async () => {
    const { t, reporter, reports } = await setup({
      '_smtp._tls.two.test': ['v=TLSRPTv1; rua=mailto:a@r.test', 'v=TLSRPTv1; rua=mailto:b@r.test'],
      '_smtp._tls.web.test': ['v=TLSRPTv1; rua=https://r.test/rpt'],
    })
    const r = reporter('node-a')
    for (const domain of ['two.test', 'web.test', 'none.test']) r.count(domain, 'sts', 'success', '')
    t.clock.advance(DAY_MS)
    expect(await r.run()).toBe(0)
    expect(await reports()).toEqual([])
    // The counts went with the claims: nothing is left to report.
    expect(await t.services.store.tlsPolicy.unreported(t.clock())).toEqual([])

    const off = await setup({ '_smtp._tls.b.test': ['v=TLSRPTv1; rua=mailto:a@r.test'] }, {})
    const quiet = off.reporter('node-a')
    quiet.count('b.test', 'sts', 'success', '')
    await quiet.flush()
    expect(await off.t.services.store.tlsPolicy.unreported(off.t.clock() + DAY_MS)).toEqual([])
  })
})
