import { afterEach, describe, expect, it } from 'vitest'
import { MxClient } from '../../relay/mx-client.js'
import type { MxHost } from '../../relay/routes.js'
import { startSink } from './sink.js'

// Connections to an MX are kept open for the next transaction, which goes out at once (no RSET
// round trip first); a kept connection found dead is replaced without the message being deferred.
describe('MxClient: connection reuse', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  async function setup() {
    const sink = await startSink()
    cleanup.push(() => sink.close())
    const client = new MxClient({ heloName: 'test.example', timeout: 5_000 })
    cleanup.push(() => client.close())
    const hosts: MxHost[] = [{ name: 'mx.example.com', port: sink.port, addresses: ['127.0.0.1'] }]
    const deliver = (n: number, to = [`r${n}@example.com`]) =>
      client.deliver(hosts, { from: 's@example.org', to }, async () => Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n`))
    return { sink, deliver, hosts, client }
  }

  it('sends consecutive messages over one connection without an RSET before each', async () => {
    const { sink, deliver } = await setup()
    for (let n = 1; n <= 5; n++) {
      const attempt = await deliver(n)
      expect(attempt.replies.get(`r${n}@example.com`)).toMatchObject({ code: 250 })
    }
    expect(sink.messages.map((m) => m.to)).toEqual([1, 2, 3, 4, 5].map((n) => [`r${n}@example.com`]))
    expect(sink.state.connections).toBe(1)
    expect(sink.state.rsets).toBe(0)
  })

  it('ends a refused transaction with RSET before the connection carries the next one', async () => {
    const { sink, deliver } = await setup()
    sink.state.rcptRule = (rcpt) => (rcpt.startsWith('gone') ? { code: 550, message: 'no such user' } : undefined)
    expect((await deliver(1, ['gone@example.com'])).replies.get('gone@example.com')).toMatchObject({ code: 550 })
    await expect.poll(() => sink.state.rsets).toBe(1)
    expect((await deliver(2)).replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.state.connections).toBe(1)
    expect(sink.messages.map((m) => m.to)).toEqual([['r2@example.com']])
  })

  it('answers 554 without sending when the body is gone from the queue, and keeps the connection', async () => {
    const { sink, deliver, hosts, client } = await setup()
    const attempt = await client.deliver(hosts, { from: 's@example.org', to: ['gone@example.com'] }, async () => undefined)
    expect(attempt.replies.get('gone@example.com')).toEqual({ code: 554, response: '5.3.0 the message body is missing from the queue' })
    expect((await deliver(2)).replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.messages.map((m) => m.to)).toEqual([['r2@example.com']])
    expect(sink.state.connections).toBe(1)
  })

  it('reads the body once when a kept connection has to be replaced', async () => {
    const { sink, deliver, hosts, client } = await setup()
    await deliver(1)
    sink.dropConnections()
    let loads = 0
    const attempt = await client.deliver(hosts, { from: 's@example.org', to: ['r2@example.com'] }, async () => (loads++, Buffer.from('Subject: m2\r\n\r\nbody 2\r\n')))
    expect(attempt.replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(loads).toBe(1)
  })

  it('delivers at once over a new connection when the kept one died unnoticed', async () => {
    const { sink, deliver } = await setup()
    await deliver(1)
    // The server hangs up; the next delivery starts before the client has read the hang-up.
    sink.dropConnections()
    const attempt = await deliver(2)
    expect(attempt.replies.get('r2@example.com')).toMatchObject({ code: 250 })
    expect(sink.state.connections).toBe(2)
    expect(sink.messages.map((m) => m.to)).toEqual([['r1@example.com'], ['r2@example.com']])
  })
})
