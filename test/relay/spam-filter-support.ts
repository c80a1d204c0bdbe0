import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { AddressInfo } from 'node:net'
import type { SMTPServer } from 'smtp-server'
import { expect } from 'vitest'
import { createOrder } from '../../accounts.js'
import { createSubmissionServer } from '../../relay/submission.js'
import { createMcpServer } from '../../transports/mcp.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { RawSmtp } from './submission-client.js'

/** An account as its user knows it: an API key and one mail order with its SMTP login. */
export interface Account {
  accountId: number
  apiKey: string
  orderId: number
  user: string
  password: string
}

export interface Mail {
  from: string
  to: string[]
  subject: string
  body?: string
  /** sendAdvMail and SMTP only. */
  bcc?: string[]
  /** Mail order; default the account's first. */
  orderId?: number
  /** SMTP only: the Subject header exactly as written (e.g. RFC 2047 encoded). */
  rawSubjectHeader?: string
}

export type SmtpStage = 'MAIL FROM' | 'RCPT TO' | 'DATA'

export type Outcome =
  | { accepted: true; txid: string; refusedRecipients: string[] }
  | {
      accepted: false
      /** REST: the HTTP status; MCP: the `code` of the error result; SMTP: the reply code. */
      code: number
      /** The error message (SMTP: the reply text after the enhanced status code). */
      message: string
      /** SMTP only: the command that was refused, and its whole reply line. */
      stage?: SmtpStage
      reply?: string
    }

export const DOORS = ['REST POST /mail/send', 'MCP sendMail', 'MCP sendAdvMail', 'SMTP submission'] as const
export type DoorName = (typeof DOORS)[number]

/** A message as an SMTP client writes it: CRLF line ends, ending with CRLF. */
export function smtpMessage(mail: Mail): string {
  return [
    `From: Sender <${mail.from}>`,
    `To: ${mail.to.join(', ')}`,
    mail.rawSubjectHeader ?? `Subject: ${mail.subject}`,
    `Message-ID: <${Math.random().toString(16).slice(2)}@client.example>`,
    'Date: Sun, 22 Nov 2026 12:00:00 +0000',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    mail.body ?? 'Hello there.',
    '',
  ].join('\r\n')
}

/**
 * A test env with every door open: REST through app.request, MCP through the SDK Client over an
 * in-memory transport, SMTP submission on 127.0.0.1 (a real socket, STARTTLS and AUTH PLAIN).
 */
export async function startHarness(tls: { key: Buffer; cert: Buffer }) {
  const env: TestEnv = await createTestEnv()
  const { store, relay, config, logger, clock, budget } = env.services
  const smtp: SMTPServer = createSubmissionServer({ store, relay, config, logger, clock, budget, tls })
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()))
  const port = (smtp.server.address() as AddressInfo).port
  const mcpClients = new Map<number, Client>()
  const sockets: RawSmtp[] = []

  const accountOf = async (a: { accountId: number; apiKey: string; orderId: number }): Promise<Account> => ({
    ...a,
    user: `mb${a.orderId}`,
    password: await store.orders.password(a.orderId),
  })
  const main = await accountOf(env)
  const rest = (account: Account) => ({ app: env.app, apiKey: account.apiKey })

  async function mcp(account: Account): Promise<Client> {
    let client = mcpClients.get(account.accountId)
    if (!client) {
      const server = createMcpServer(env.services, () => ({ accountId: account.accountId, origin: '127.0.0.1' }))
      const [a, b] = InMemoryTransport.createLinkedPair()
      client = new Client({ name: 'spam-filter-test', version: '1.0.0' })
      await Promise.all([server.connect(a), client.connect(b)])
      mcpClients.set(account.accountId, client)
    }
    return client
  }

  async function viaRest(account: Account, mail: Mail): Promise<Outcome> {
    const res = await call(rest(account), 'POST', '/mail/send', {
      to: mail.to.length === 1 ? mail.to[0] : mail.to,
      from: mail.from,
      subject: mail.subject,
      body: mail.body ?? 'Hello there.',
      id: mail.orderId,
    })
    const body = await res.json()
    if (res.status === 200) {
      expect(body).toEqual({ status: 'ok', text: expect.stringMatching(/^[0-9a-f]{18,19}$/) })
      return { accepted: true, txid: body.text, refusedRecipients: [] }
    }
    expect(body).toEqual({ code: res.status, message: expect.any(String) })
    return { accepted: false, code: res.status, message: body.message }
  }

  async function viaMcp(account: Account, tool: 'sendMail' | 'sendAdvMail', mail: Mail): Promise<Outcome> {
    const client = await mcp(account)
    const args =
      tool === 'sendMail'
        ? {
            to: mail.to.length === 1 ? mail.to[0] : mail.to,
            from: mail.from,
            subject: mail.subject,
            body: mail.body ?? 'Hello there.',
            id: mail.orderId,
          }
        : {
            from: { email: mail.from, name: 'Sender' },
            to: mail.to.map((email) => ({ email })),
            ...(mail.bcc ? { bcc: mail.bcc.map((email) => ({ email })) } : {}),
            subject: mail.subject,
            body: mail.body ?? 'Hello there.',
            id: mail.orderId,
          }
    const result = await client.callTool({ name: tool, arguments: args })
    const text = (result.content as { type: string; text: string }[])[0].text
    if (!result.isError) {
      const txid = (result.structuredContent as { text: string }).text
      expect(txid).toMatch(/^[0-9a-f]{18,19}$/)
      return { accepted: true, txid, refusedRecipients: [] }
    }
    const error = JSON.parse(text)
    expect(error).toEqual({ code: expect.any(Number), message: expect.any(String) })
    return { accepted: false, code: error.code, message: error.message }
  }

  async function viaSmtp(account: Account, mail: Mail): Promise<Outcome> {
    const c = await RawSmtp.open(port)
    sockets.push(c)
    try {
      expect(await c.greeting).toMatch(/^220 /)
      expect(await c.cmd('EHLO client.example')).toMatch(/^250/)
      expect(await c.starttls()).toMatch(/^220 /)
      expect(await c.cmd('EHLO client.example')).toMatch(/^250/)
      expect(await c.authPlain(account.user, account.password)).toMatch(/^235 /)
      const refused = (stage: SmtpStage, reply: string): Outcome => {
        const m = /^(\d{3})[ -](?:\d\.\d{1,3}\.\d{1,3} )?([\s\S]*)$/.exec(reply)!
        return { accepted: false, code: Number(m[1]), message: m[2], stage, reply }
      }
      const mailReply = await c.cmd(`MAIL FROM:<${mail.from}>`)
      if (!mailReply.startsWith('250')) return refused('MAIL FROM', mailReply)
      const recipients = [...mail.to, ...(mail.bcc ?? [])]
      const replies: [string, string][] = []
      for (const r of recipients) replies.push([r, await c.cmd(`RCPT TO:<${r}>`)])
      const refusedRcpts = replies.filter(([, reply]) => !reply.startsWith('250'))
      if (refusedRcpts.length === recipients.length) return refused('RCPT TO', refusedRcpts[0][1])
      expect(await c.cmd('DATA')).toMatch(/^354 /)
      // The message ends with CRLF; cmd() adds the CRLF after the terminating dot.
      const end = await c.cmd(`${smtpMessage(mail)}.`)
      if (!end.startsWith('250')) return refused('DATA', end)
      const txid = /^250 Message queued as ([0-9a-f]{18,19})$/.exec(end)?.[1]
      expect(txid, end).toBeDefined()
      return { accepted: true, txid: txid!, refusedRecipients: refusedRcpts.map(([r]) => r) }
    } finally {
      await c.cmd('QUIT').catch(() => undefined)
      c.close()
    }
  }

  return {
    env,
    main,
    port,
    /** Sends one message through a door, as the given account. */
    send(door: DoorName, mail: Mail, account: Account = main): Promise<Outcome> {
      switch (door) {
        case 'REST POST /mail/send':
          return viaRest(account, mail)
        case 'MCP sendMail':
          return viaMcp(account, 'sendMail', mail)
        case 'MCP sendAdvMail':
          return viaMcp(account, 'sendAdvMail', mail)
        case 'SMTP submission':
          return viaSmtp(account, mail)
      }
    },
    /** Another account with its own key and order. */
    async newAccount(): Promise<Account> {
      return accountOf(await env.newAccount())
    },
    /** A second active mail order of an account. */
    async newOrder(account: Account): Promise<Account> {
      const { order } = await createOrder(env.services, account.accountId, 'second', [])
      return { ...account, orderId: order.id, user: `mb${order.id}`, password: await store.orders.password(order.id) }
    },
    /** `total` of GET /mail/log (all rows of the account's first order). */
    async logTotal(account: Account = main): Promise<number> {
      const res = await call(rest(account), 'GET', `/mail/log?id=${account.orderId}`)
      expect(res.status).toBe(200)
      return (await res.json()).total
    },
    /** GET /mail/blocks. */
    async blocks(account: Account = main): Promise<{
      local: { date: string; from: string; messageId: string | null; subject: string; to: string }[]
      mbtrap: { date: string; from: string; messageId: string | null; subject: string; to: string }[]
      subject: { from: string; subject: string }[]
    }> {
      const res = await call(rest(account), 'GET', '/mail/blocks')
      expect(res.status).toBe(200)
      return res.json()
    },
    /** POST /mail/blocks/delete {email}. */
    async delist(email: string, account: Account = main): Promise<{ status: number; body: unknown }> {
      const res = await call(rest(account), 'POST', '/mail/blocks/delete', { email })
      return { status: res.status, body: await res.json() }
    },
    blockSender(
      address: string,
      options: { source?: 'external' | 'internal'; reason?: string; account?: Account } = {},
    ) {
      const { source = 'internal', reason = 'blocked by the operator', account = main } = options
      return store.blocks.addToList({
        accountId: account.accountId,
        source,
        kind: 'sender',
        address,
        reason,
        now: clock(),
      })
    },
    suppress(address: string, account: Account = main) {
      return store.blocks.addToList({
        accountId: account.accountId,
        source: 'internal',
        kind: 'recipient',
        address,
        reason: 'an earlier message to it bounced: 550 5.1.1 user unknown',
        now: clock(),
      })
    },
    async close() {
      for (const c of mcpClients.values()) await c.close().catch(() => undefined)
      for (const s of sockets) s.close()
      await new Promise<void>((resolve) => smtp.close(() => resolve()))
      await env.app.close()
      await env.close()
    },
  }
}

export type Harness = Awaited<ReturnType<typeof startHarness>>
