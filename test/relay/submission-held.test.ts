import { mkdtemp, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SMTPServer } from 'smtp-server'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { createSubmissionServer, submissionLimits } from '../../relay/submission.js'
import { loadTls } from '../../relay/tls.js'
import { DEFAULT_POLICY, type SendPolicy } from '../../storage/store.js'
import { deliveringEnv, type DeliveringEnv } from '../tools/envs.js'
import { logRows, storedCounts } from '../tools/support.js'
import { refusal, SmtpClient } from './submission-client.js'

// SMTP submission under its mail order's send policy (docs/approval.md): a real client, the
// submission server, a real delivery worker and a real destination (the sink), which must
// receive nothing of a held message until a person approves it, and then receive it once.

const HELD = /^250 Message held as ([0-9a-f]{18}): waiting for a person's approval until (\S+) \((\S+)\)$/
const QUEUED = /^250 Message queued as ([0-9a-f]{18})$/
const message = (subject: string, to = 'bob@example.com') =>
  [`From: agent@example.org`, `To: ${to}`, `Subject: ${subject}`, '', 'Hello.', ''].join('\r\n')

let dataDir: string
let tls: { key: Buffer; cert: Buffer }
let d: DeliveringEnv
let server: SMTPServer
let client: SmtpClient

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-submission-held-'))
  tls = await loadTls({ smtp: loadConfig({ MAILROOM_DATA_DIR: dataDir }).smtp, dataDir, nodeName: 'localhost' })
})
afterAll(() => rm(dataDir, { recursive: true, force: true }))

beforeEach(async () => {
  d = await deliveringEnv()
  const { services } = d.env
  server = createSubmissionServer({ ...services, relay: d.ctx.relay, tls, limits: submissionLimits(services.config) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  client = await SmtpClient.open((server.server.address() as AddressInfo).port)
  await client.login(`mb${d.env.orderId}`, await services.store.orders.password(d.env.orderId))
})
afterEach(async () => {
  client.close()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await d.close()
})

const setPolicy = (rules: Partial<SendPolicy> | null) =>
  d.env.services.store.policies.set(
    { kind: 'order', id: d.env.orderId },
    rules === null ? null : { ...DEFAULT_POLICY, ...rules },
  )
const submit = (subject: string, to = 'bob@example.com') =>
  client.send({ from: 'agent@example.org', to: [to] }, message(subject, to))
/** Waits until the sink has received `n` messages, then answers their subjects. */
async function sunk(n: number): Promise<string[]> {
  d.worker.kick()
  await expect.poll(() => d.sink.messages.length, { timeout: 15_000, interval: 50 }).toBeGreaterThanOrEqual(n)
  return d.sink.messages.map((m) => /^Subject: (.*)$/m.exec(m.raw.toString('utf8'))?.[1] ?? '')
}

describe('SMTP submission under the order send policy', () => {
  it('answers 250 "held"; the destination gets nothing until it is approved, then it once', async () => {
    // The destination fails the test if the held message reaches it before its approval.
    let approved = false
    const early: string[] = []
    d.sink.state.rcptRule = (rcpt) => {
      if (rcpt === 'held@example.com' && !approved) early.push(rcpt)
      return undefined
    }
    await setPolicy({ approval: 'always' })
    const info = await submit('held one', 'held@example.com')
    const [, txid, until, url] = HELD.exec(info.response) ?? []
    expect(txid, info.response).toBeDefined()
    expect(until).toBe(new Date(d.env.clock() + 24 * 3_600_000).toISOString())
    expect(url).toBe(`${d.env.config.publicUrl}/console/approvals?id=${txid}`)
    expect(await d.env.services.store.holds.get(txid)).toMatchObject({
      status: 'held',
      holderLabel: `mail order mb${d.env.orderId}`,
      reason: `every send of mail order mb${d.env.orderId} needs approval`,
    })

    // A message sent after it, with the policy cleared, is delivered; the held one is not.
    await setPolicy(null)
    expect((await submit('queued one')).response).toMatch(QUEUED)
    expect(await sunk(1)).toEqual(['queued one'])
    expect((await logRows(d.env, { mailid: txid })).rows).toEqual([
      expect.objectContaining({ delivered: 0, response: expect.stringMatching(/^held for a person's approval/) }),
    ])

    approved = true
    await d.env.services.store.holds.decide({ txid, decision: 'approve', by: 'test', now: d.env.clock() })
    expect(await sunk(2)).toEqual(['queued one', 'held one'])
    // Delivered once: its row is final, and nothing is due any more.
    await expect
      .poll(async () => (await logRows(d.env, { mailid: txid })).rows.map((r) => r.delivered), { timeout: 15_000 })
      .toEqual([1])
    expect(await sunk(2)).toEqual(['queued one', 'held one'])
    expect(early).toEqual([])
  })

  it('refuses a recipient outside allowedRecipients at RCPT TO with 550 5.7.1, storing nothing', async () => {
    await setPolicy({ allowedRecipients: ['@example.net'] })
    const err = await refusal(submit('not allowed', 'eve@example.com'))
    expect(err.responseCode).toBe(550)
    expect(err.response).toBe(
      `550 5.7.1 to: eve@example.com is not among the recipients mail order mb${d.env.orderId} may send to (allowed: @example.net)`,
    )
    expect(storedCounts(d.env)).toEqual({ messages: 0, bodies: 0, deliveries: 0 })
  })

  it('answers 451 4.7.1 past maxPerHour, storing nothing, and takes the message again in the next hour', async () => {
    d.env.clock.set(Date.UTC(2026, 10, 22, 12, 30))
    await setPolicy({ maxPerHour: 1 })
    expect((await submit('first')).response).toMatch(QUEUED)
    const before = storedCounts(d.env)
    const err = await refusal(submit('second'))
    expect(err.response).toBe(
      `451 4.7.1 maxPerHour 1 reached for mail order mb${d.env.orderId}: the next send is possible at 2026-11-22T13:00:00.000Z (in 1800 s)`,
    )
    expect(storedCounts(d.env)).toEqual(before)
    d.env.clock.set(Date.UTC(2026, 10, 22, 13, 0))
    await client.reset()
    expect((await submit('second')).response).toMatch(QUEUED)
  })
})
