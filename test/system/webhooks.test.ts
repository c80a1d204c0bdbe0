import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startEndpoint } from '../relay/webhook-endpoint.js'
import { startDnsmasq, startMailroom, startSmtpSink, waitFor } from './peers.js'

// A webhook's host name is checked against what it resolves to when an event is sent, not only
// when it is added: a name that resolves into the network mailroom runs in gets nothing.
describe('system: a webhook whose name resolves to a loopback address, served by dnsmasq', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  it('is added, but posted nothing, the webhook showing why; with MAILROOM_ALLOW_PRIVATE_WEBHOOKS=true it is posted', async () => {
    const dns = await startDnsmasq(['--host-record=hook.inside.test,127.0.0.1'])
    cleanup.push(dns.stop)
    const sink = await startSmtpSink()
    cleanup.push(sink.stop)
    const endpoint = await startEndpoint()
    cleanup.push(() => endpoint.close())

    const run = async (env: Record<string, string>) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-webhook-dns-'))
      cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const server = await startMailroom({
        MAILROOM_DATA_DIR: dataDir,
        MAILROOM_DNS_SERVERS: dns.server,
        MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
        ...env,
      })
      cleanup.push(() => server.child.kill('SIGKILL'))
      const apiKey = /API key \(shown only now\): (\S+)/.exec(
        await waitFor(async () => /Try it/.test(server.output()) && server.output()),
      )![1]
      const api = (path: string, body?: object) =>
        fetch(`http://127.0.0.1:${server.httpPort}${path}`, {
          method: body ? 'POST' : 'GET',
          headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
          body: body && JSON.stringify(body),
        })
      const url = `http://hook.inside.test:${endpoint.port}/hooks`
      expect((await api('/webhooks', { url, events: ['message.accepted'] })).status).toBe(200)
      const sent = await api('/mail/send', { from: 'me@example.org', to: 'r@example.com', subject: 'dns', body: 'x' })
      expect(sent.status).toBe(200)
      return { api, server }
    }

    const refused = await run({})
    const [hook] = await waitFor(async () => {
      const hooks = await (await refused.api('/webhooks')).json()
      return hooks[0].status === 'failing' && hooks
    })
    expect(hook.lastError).toMatch(
      /^hook\.inside\.test resolves only to 127\.0\.0\.1, a loopback address: not sent \(MAILROOM_ALLOW_PRIVATE_WEBHOOKS\)/,
    )
    expect(endpoint.received).toEqual([])

    const allowed = await run({ MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true' })
    await waitFor(async () => endpoint.received.length === 1)
    expect(endpoint.received[0].event).toMatchObject({ type: 'message.accepted', data: { recipient: 'r@example.com' } })
    expect(allowed.server.output()).not.toContain('"level":50')
  })
})
