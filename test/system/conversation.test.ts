import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { simpleParser } from 'mailparser'
import nodemailer from 'nodemailer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../helpers.js'
import { startEndpoint } from '../relay/webhook-endpoint.js'
import { startDnsmasq, startMailroom, startSmtpSink, waitFor } from './peers.js'

/** Starting processes on a loaded machine takes many seconds. */
const PROCESS_WAIT = 120_000

/**
 * The conversation of issue #37 end to end: an agent sends from an inbox over MCP, the customer's
 * answer comes in through the MX door (nodemailer, In-Reply-To set), is posted to a webhook and
 * listed with its new part, the agent answers it with replyToMessage, and the thread reads the
 * three in order. `mailroom serve` runs as built, delivering through a smtp-sink smarthost, its
 * MX door's checks asking a dnsmasq of `.test` names.
 */
describe('system: a conversation through an inbox', () => {
  const cleanup: (() => unknown)[] = []
  afterAll(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })

  let client: Client
  let mxPort: number
  let sink: Awaited<ReturnType<typeof startSmtpSink>>
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>

  /** A tool's result, or the test fails with its error. */
  const call = async <T = Record<string, unknown>>(name: string, args: Record<string, unknown>): Promise<T> => {
    const result = await client.callTool({ name, arguments: args })
    expect(result.isError, `${name}: ${JSON.stringify(result.content)}`).toBeFalsy()
    return result.structuredContent as T
  }
  /** What the customer sends to the MX door, as any mail server would. */
  const customerSends = (mail: nodemailer.SendMailOptions) =>
    nodemailer
      .createTransport({ host: '127.0.0.1', port: mxPort, secure: false, tls: { rejectUnauthorized: false } })
      .sendMail({ from: 'Customer <customer@customer.test>', to: 'agent@agents.test', ...mail })

  beforeAll(async () => {
    const dns = await startDnsmasq([])
    cleanup.push(dns.stop)
    sink = await startSmtpSink()
    cleanup.push(sink.stop)
    endpoint = await startEndpoint()
    cleanup.push(() => endpoint.close())
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-conversation-'))
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
    const server = await startMailroom({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_MX_LISTEN_PORT: '0',
      MAILROOM_MX_HOSTNAME: 'mx.agents.test',
      MAILROOM_DNS_SERVERS: dns.server,
      MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
      MAILROOM_ALLOW_PRIVATE_WEBHOOKS: 'true',
    })
    cleanup.push(() => server.child.kill('SIGKILL'))
    const output = await waitFor(async () => /Try it/.test(server.output()) && server.output())
    const apiKey = /API key \(shown only now\): (\S+)/.exec(output)![1]
    mxPort = Number(/"mxPort":(\d+)/.exec(output)![1])
    const added = await runCli(['domain', 'add', 'agents.test', '--account', '1', '--algorithm', 'ed25519'], {
      MAILROOM_DATA_DIR: dataDir,
    })
    expect(added.status, added.stderr).toBe(0)
    client = new Client({ name: 'conversation', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.httpPort}/mcp`), {
        requestInit: { headers: { 'X-API-KEY': apiKey } },
      }),
    )
    cleanup.push(() => client.close())
    await call('setDomainReceiving', { domain: 'agents.test' })
    await call('addInbox', { address: 'agent@agents.test' })
    await call('addWebhook', { url: endpoint.url, events: ['message.received'] })
  }, PROCESS_WAIT)

  /** The sink's messages as parsed, in the order they arrived. */
  const sinkMessages = () => Promise.all(sink.messages().map((m) => simpleParser(m.text)))

  it(
    'sends, receives the answer with its new part, answers it, and reads the thread in order',
    async () => {
      const { text: first } = await call<{ text: string }>('sendMail', {
        from: 'agent@agents.test',
        to: 'customer@customer.test',
        subject: 'Your quote',
        body: 'The price is 40 EUR.',
      })
      // smtp-sink writes a message's file as it arrives: wait for its text, not only for the file.
      const [quote] = await waitFor(async () => {
        const all = await sinkMessages()
        return all.length === 1 && all[0].subject ? all : undefined
      })
      expect(quote.subject).toBe('Your quote')

      await customerSends({
        subject: 'Re: Your quote',
        inReplyTo: quote.messageId,
        references: [quote.messageId!],
        text: `Sounds good, go ahead.\n\nOn Sat, 28 Nov 2026 at 10:00, agent@agents.test wrote:\n> The price is 40 EUR.\n`,
      })
      const [posted] = await waitFor(async () => endpoint.of('message.received').length === 1 && endpoint.received)
      expect(posted.event.data).toMatchObject({
        inbox: 'agent@agents.test',
        subject: 'Re: Your quote',
        extractedText: 'Sounds good, go ahead.',
        from: { address: 'customer@customer.test', name: 'Customer' },
      })
      const list = await call<{ total: number; messages: Record<string, unknown>[] }>('listInboundMessages', {})
      expect(list.total).toBe(1)
      const [answer] = list.messages
      expect(answer).toMatchObject({ id: posted.event.data.id, extractedText: 'Sounds good, go ahead.' })

      const { text: reply } = await call<{ text: string }>('replyToMessage', {
        id: answer.id,
        text: 'Thank you, it is on its way.',
      })
      const sent = await waitFor(async () =>
        sink.messages().find((m) => m.text.includes('Thank you, it is on its way.')),
      )
      expect(sent.from).toBe('agent@agents.test')
      expect(sent.to).toEqual(['customer@customer.test'])
      const replied = await simpleParser(sent.text)
      expect(replied.subject).toBe('Re: Your quote')
      expect(replied.from?.text).toBe('agent@agents.test')
      expect(answer.messageId).toMatch(/@customer\.test$/)
      expect(replied.inReplyTo).toBe(`<${answer.messageId}>`)
      expect(replied.references).toEqual([quote.messageId, `<${answer.messageId}>`])

      const thread = await call<{ messages: { direction: string; message: Record<string, unknown> }[] }>('getThread', {
        id: answer.threadId,
      })
      expect(thread.messages.map((m) => [m.direction, m.message.mailid ?? m.message.id])).toEqual([
        ['sent', first],
        ['received', answer.id],
        ['sent', reply],
      ])
    },
    PROCESS_WAIT,
  )

  it(
    'does not answer an auto-reply unless told force',
    async () => {
      await customerSends({
        subject: 'Out of office',
        headers: { 'Auto-Submitted': 'auto-replied' },
        text: 'I am away until Monday.',
      })
      const auto = await waitFor(async () => {
        const { messages } = await call<{ messages: { id: string; subject: string; automatic: string | null }[] }>(
          'listInboundMessages',
          {},
        )
        return messages.find((m) => m.subject === 'Out of office')
      })
      expect(auto.automatic).toMatch(/auto-replied/)
      const before = sink.count()
      const log = async () => (await call<{ total: number }>('viewMailLog', {})).total
      const queued = await log()
      const refused = await client.callTool({ name: 'replyToMessage', arguments: { id: auto.id, text: 'Noted.' } })
      expect(refused.isError).toBe(true)
      expect(JSON.parse((refused.content as { text: string }[])[0].text)).toEqual({
        code: 400,
        message: expect.stringMatching(/is automatic \(.*auto-replied.*\); answering it could start a mail loop/),
      })
      expect(await log()).toBe(queued)
      await call('replyToMessage', { id: auto.id, text: 'Noted.', force: true })
      await waitFor(async () => sink.count() === before + 1)
      expect(await log()).toBe(queued + 1)
    },
    PROCESS_WAIT,
  )
})
