/**
 * SMTP TLS reporting (RFC 8460): the sessions toward domains with an MTA-STS policy are counted
 * per policy domain and UTC day, by result, in the store (every node adds to the same counts);
 * once a day has ended, one node claims each domain's report and mails it, as JSON, to the
 * `rua` addresses of the domain's `_smtp._tls` record.
 */
import { gzipSync } from 'node:zlib'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { DAY_MS, type NewMessage, type Store, type TlsResultCount, joinPieces } from '../storage/store.js'
import { signMessage } from './dkim.js'
import { dateHeader, header, multipart, newMessageId, textPart } from './message.js'
import type { MxResolver } from './routes.js'

/** How often this node's counts go to the store. */
const FLUSH_MS = 30_000
/** How often due reports are looked for. */
const RUN_MS = 3_600_000
/** A day's report waits this long after the day ends: every node has flushed its counts by then. */
export const REPORT_DELAY_MS = 10 * 60_000
/** Claims of reports are kept this long (a day is never reported twice while its claim is kept). */
const CLAIMS_KEPT_MS = 30 * DAY_MS
/** Most rua addresses one report goes to: a record cannot make one report many messages. */
const MAX_RUA = 5

export interface TlsReportDeps {
  store: Store
  config: Pick<Config, 'tlsReports' | 'nodeName'>
  logger: Logger
  clock: () => number
  resolver: MxResolver
  /** The node a report's claim is recorded under. */
  node: string
  newTxid: (now: number) => string
  /** Told when a report was queued (the worker looks at the queue). */
  queued: () => void
}

const dayOf = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS

/**
 * The counts of this node, flushed to the store every FLUSH_MS, and the daily reports. Nothing is
 * counted while MAILROOM_TLS_REPORTS_ORDER is unset: no report could be sent.
 */
export class TlsReports {
  private tally = new Map<string, TlsResultCount>()
  private timer: NodeJS.Timeout | null = null
  private lastRun = 0

  constructor(private readonly deps: TlsReportDeps) {}

  /** Counts one session (or failed policy fetch) toward `domain`; a success is counted without its MX host. */
  count(domain: string, policyType: TlsResultCount['policyType'], resultType: string, mxHost: string): void {
    if (this.deps.config.tlsReports.orderId === null) return
    const row = {
      domain,
      day: dayOf(this.deps.clock()),
      policyType,
      resultType,
      mxHost: resultType === 'success' ? '' : mxHost,
    }
    const key = JSON.stringify(row)
    const known = this.tally.get(key)
    if (known) known.count++
    else this.tally.set(key, { ...row, count: 1 })
  }

  start(): void {
    if (this.deps.config.tlsReports.orderId === null) return
    this.timer = setInterval(() => {
      if (this.deps.clock() - this.lastRun >= RUN_MS) void this.run()
      else void this.flush()
    }, FLUSH_MS)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.flush()
  }

  /** Writes this node's counts to the store; kept for the next flush should the write fail. */
  async flush(): Promise<void> {
    if (this.tally.size === 0) return
    const rows = [...this.tally.values()]
    this.tally.clear()
    try {
      await this.deps.store.tlsPolicy.count(rows)
    } catch (err) {
      this.deps.logger.error({ err }, 'TLS-RPT: writing the counts failed; tried again')
      for (const row of rows) {
        const key = JSON.stringify({ ...row, count: undefined })
        const known = this.tally.get(key)
        if (known) known.count += row.count
        else this.tally.set(key, row)
      }
    }
  }

  /**
   * Sends the reports of the days that ended (REPORT_DELAY_MS ago at least) that no node has
   * claimed: each domain's, once, whichever node claims it first. Resolves with how many were queued.
   */
  async run(): Promise<number> {
    const { store, logger, clock, node } = this.deps
    const now = clock()
    this.lastRun = now
    await this.flush()
    let queued = 0
    try {
      for (const { domain, day } of await store.tlsPolicy.unreported(dayOf(now - REPORT_DELAY_MS))) {
        const counts = await store.tlsPolicy.claimReport({ domain, day, node, now })
        if (counts && (await this.send(domain, day, counts, now))) queued++
      }
      await store.tlsPolicy.prune(dayOf(now - CLAIMS_KEPT_MS))
    } catch (err) {
      logger.error({ err }, 'TLS-RPT: sending the daily reports failed')
    }
    if (queued) this.deps.queued()
    return queued
  }

  /** Queues a domain's report of a day to its rua addresses; false when it has none to send to. */
  private async send(domain: string, day: number, counts: TlsResultCount[], now: number): Promise<boolean> {
    const { store, logger, config } = this.deps
    const rua = await this.reportAddresses(domain)
    if (rua.length === 0) {
      logger.info(
        { domain },
        'TLS-RPT: the domain asks for no report by mail (no _smtp._tls record with a mailto: rua)',
      )
      return false
    }
    const order = await store.orders.get(config.tlsReports.orderId!)
    if (order?.status !== 'active') {
      logger.error({ order: config.tlsReports.orderId }, 'TLS-RPT: MAILROOM_TLS_REPORTS_ORDER is no active mail order')
      return false
    }
    const txid = this.deps.newTxid(now)
    const from = config.tlsReports.from
    const submitter = from.slice(from.lastIndexOf('@') + 1)
    const policy = await store.tlsPolicy.policy(domain)
    const report = tlsReport({ domain, day, counts, policy: policy ?? null, from, reportId: `${txid}@${submitter}` })
    const composed = composeTlsReport({ report, from, to: rua, txid, now })
    const raw = await signMessage(
      { store, logger },
      { accountId: order.accountId, from, raw: [composed.raw], time: now, txid },
    )
    const message: NewMessage = {
      txid,
      accountId: order.accountId,
      orderId: order.id,
      envFrom: from,
      recipients: rua,
      headerFrom: from,
      replyTo: null,
      subject: composed.subject,
      messageId: composed.messageId,
      origin: config.nodeName,
      transtype: 'TLSRPT',
      // What the stores know a report by: it is never billed.
      interface: 'report',
      sendingZone: 'default',
      raw: [joinPieces(raw)],
      time: now,
    }
    await store.mail.enqueue(message)
    logger.info({ txid, domain, day: new Date(day).toISOString().slice(0, 10), rua }, 'TLS-RPT: report queued')
    return true
  }

  /** The mailto: addresses of the domain's TLS-RPT record (RFC 8460 §3); https: ones are not posted to. */
  private async reportAddresses(domain: string): Promise<string[]> {
    const { resolver } = this.deps
    if (!resolver.resolveTxt) return []
    let records: string[][]
    try {
      records = await resolver.resolveTxt(`_smtp._tls.${domain}`)
    } catch {
      return []
    }
    const found = records.map((r) => r.join('')).filter((r) => /^v=TLSRPTv1\s*;/.test(r))
    // RFC 8460 §3: more than one record is none.
    if (found.length !== 1) return []
    const rua = /(?:^|;)\s*rua=([^;]*)/.exec(found[0])?.[1] ?? ''
    return rua
      .split(',')
      .map((uri) => uri.trim())
      .filter((uri) => /^mailto:/i.test(uri))
      .map((uri) => safeDecode(uri.slice(7).replace(/\?.*$/, '')))
      .filter((address): address is string => address !== null && /^[^@\s<>]+@[^@\s<>]+$/.test(address))
      .slice(0, MAX_RUA)
  }
}

const safeDecode = (s: string) => {
  try {
    return decodeURIComponent(s)
  } catch {
    return null
  }
}

/** The report (RFC 8460 §4.3, §4.4): one policy entry per policy type counted. */
export function tlsReport(input: {
  domain: string
  day: number
  counts: TlsResultCount[]
  policy: { mx: string[]; text: string } | null
  from: string
  reportId: string
}) {
  const iso = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`
  const types = [...new Set(input.counts.map((c) => c.policyType))]
  return {
    'organization-name': input.from.slice(input.from.lastIndexOf('@') + 1),
    'date-range': { 'start-datetime': iso(input.day), 'end-datetime': iso(input.day + DAY_MS - 1000) },
    'contact-info': input.from,
    'report-id': input.reportId,
    policies: types.map((type) => {
      const counts = input.counts.filter((c) => c.policyType === type)
      const failures = counts.filter((c) => c.resultType !== 'success')
      const sum = (rows: TlsResultCount[]) => rows.reduce((n, c) => n + c.count, 0)
      const sts = type === 'sts' && input.policy
      return {
        policy: {
          'policy-type': type,
          ...(sts && {
            'policy-string': input.policy!.text.split(/\r?\n/).filter((line) => line.trim() !== ''),
            'mx-host': input.policy!.mx,
          }),
          'policy-domain': input.domain,
        },
        summary: {
          'total-successful-session-count': sum(counts) - sum(failures),
          'total-failure-session-count': sum(failures),
        },
        'failure-details': failures.map((c) => ({
          'result-type': c.resultType,
          ...(c.mxHost && { 'receiving-mx-hostname': c.mxHost }),
          'failed-session-count': c.count,
        })),
      }
    }),
  }
}

/**
 * The report as a message (RFC 8460 §5.3): `multipart/report; report-type="tlsrpt"`, a short
 * text, then the JSON gzipped as `application/tlsrpt+gzip`, named as §5.3 asks.
 */
export function composeTlsReport(input: {
  report: ReturnType<typeof tlsReport>
  from: string
  to: string[]
  txid: string
  now: number
}): { raw: Buffer; messageId: string; subject: string } {
  const { report } = input
  const domain = report.policies[0]?.policy['policy-domain'] ?? ''
  const submitter = report['organization-name']
  const subject = `Report Domain: ${domain} Submitter: ${submitter} Report-ID: <${report['report-id']}>`
  const messageId = newMessageId(input.txid, input.from)
  const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000)
  const range = report['date-range']
  const filename = `${submitter}!${domain}!${seconds(range['start-datetime'])}!${seconds(range['end-datetime']) + 1}!${input.txid}.json.gz`
  const gz = gzipSync(JSON.stringify(report)).toString('base64')
  const headers = [
    header('From', `TLS Reports <${input.from}>`),
    header('To', input.to.join(', ')),
    header('Subject', subject),
    `Message-ID: ${messageId}\r\n`,
    `Date: ${dateHeader(new Date(input.now))}\r\n`,
    `TLS-Report-Domain: ${domain}\r\n`,
    `TLS-Report-Submitter: ${submitter}\r\n`,
    'Auto-Submitted: auto-generated\r\n',
    'MIME-Version: 1.0\r\n',
  ]
  const parts = [
    textPart('plain', `This is an aggregate TLS report (RFC 8460) from ${submitter} about mail sent to ${domain}.\n`),
    `Content-Type: application/tlsrpt+gzip\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="${filename}"\r\n\r\n${gz.replace(/.{76}/g, '$&\r\n')}`,
  ]
  const raw = Buffer.from(
    headers.join('') + multipart('report; report-type="tlsrpt"', `--_mailroom-tlsrpt-${input.txid}`, parts),
  )
  return { raw, messageId, subject }
}
