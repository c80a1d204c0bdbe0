import type { Logger } from 'pino'
import { SMTPServer, type SMTPServerSession } from 'smtp-server'
import type { Config } from '../../config.js'
import type { Metrics } from '../../metrics.js'
import { isEmail, notAnEmail } from '../addresses.js'
import { authClient } from '../auth-throttle.js'
import type { ByteBudget } from '../byte-budget.js'
import type { MxRefusalReason } from '../refusal.js'
import {
  BUSY,
  type ConnectionCounter,
  connectionCounter,
  declaredSize,
  envelopeAddress,
  FIRST_RESERVATION,
  readWithin,
  reply,
  unofferedParameter,
} from '../smtp-door.js'
import type { AuthVerdict, InboundRecipient, Store } from '../../storage/store.js'
import { parseInbound } from './parse.js'
import { splitHead } from './pieces.js'
import { type DnsResolve, dmarcRejects, verifyInbound } from './verify.js'

/**
 * Where received mail goes: the Store's `inbound` namespace (in `mailroom serve`, its `receive`
 * made by the engine thread, which takes over the memory of the pieces of `raw`). `receive`
 * stores the message for every recipient of one account in one transaction; the door
 * acknowledges only once it resolved.
 */
export type InboundReceiver = Pick<Store['inbound'], 'recipient' | 'receive'>

export interface MxDeps {
  inbound: InboundReceiver
  config: Pick<Config, 'smtp' | 'maxMessageSize' | 'maxRecipients'>
  /** This MX's public name: in the greeting, and the authserv-id of Authentication-Results. */
  hostname: string
  /** Bytes an inbox may hold (the inbox quota setting), asked about at each RCPT. */
  quota: number
  logger: Logger
  clock: () => number
  tls: { key: string | Buffer; cert: string | Buffer }
  /** Message bytes held in memory, shared with every other door of the process. */
  budget: ByteBudget
  /** SPF, DKIM and DMARC lookups (authResolver). */
  resolver: DnsResolve
  /** Connections per client; the door's own when not given. */
  connections?: ConnectionCounter
  /** Where messages received and refusals are counted (GET /metrics). */
  metrics?: Pick<Metrics, 'received' | 'mxRefused'>
}

/** RFC 1870 SIZE and RFC 6152 BODY: no AUTH on the MX door, and no SMTPUTF8 or DSN. */
const MAIL_PARAMETERS: ReadonlySet<string> = new Set(['SIZE', 'BODY'])

/**
 * The MX door: the SMTP server the internet's mail arrives at, for the accounts' receiving
 * domains. No AUTH: a recipient that is no inbox is refused at RCPT (550 5.1.1), so nothing is
 * stored and no bounce is sent back to a forged sender; a domain no account receives for is
 * `550 5.7.1 relay not permitted`, so it is never an open relay. At the end of DATA the message
 * is checked (SPF, DKIM, DMARC, ARC), refused when its From domain's DMARC policy says reject,
 * otherwise stored with an Authentication-Results header for each account it is for, and only
 * then answered 250.
 */
export function createMxServer(deps: MxDeps): SMTPServer {
  const { inbound, config, logger, clock, budget, hostname, metrics } = deps
  /** Counts a refusal by its reason, and hands the reply on. */
  const counted = <E>(reason: MxRefusalReason, err: E): E => {
    metrics?.mxRefused(reason)
    return err
  }
  const connections = deps.connections ?? connectionCounter(config.smtp.maxClientsPerAddress)
  const admitted = new WeakMap<SMTPServerSession, string>()
  // Recipients refused on the connection since it last had a message accepted: a client trying
  // address after address (a directory harvest) is cut off past as many as a message may have.
  const refused = new WeakMap<SMTPServerSession, number>()
  // The account of each recipient accepted in the session's transaction.
  const accountOf = new WeakMap<SMTPServerSession, Map<string, number>>()
  const closeWith = (session: SMTPServerSession, reason: MxRefusalReason, text: string) => {
    metrics?.mxRefused(reason)
    for (const connection of server.connections) if (connection.session === session) connection.send(421, text, false)
  }

  const server = new SMTPServer({
    name: hostname,
    banner: 'mailroom MX',
    key: deps.tls.key,
    cert: deps.tls.cert,
    size: config.maxMessageSize,
    disabledCommands: ['AUTH'],
    authOptional: true,
    disableReverseLookup: true,
    maxClients: config.smtp.maxClients,
    hideDSN: true,
    hideSMTPUTF8: true,
    hideREQUIRETLS: true,
    logger: false,

    onConnect(session, callback) {
      const client = authClient(session.remoteAddress)
      if (!connections.take(client)) {
        logger.warn({ ip: session.remoteAddress }, 'MX connection refused: too many from the client')
        return callback(
          counted('too_many_connections', reply(421, `4.7.0 Too many connections from ${client}; try again later`)),
        )
      }
      admitted.set(session, client)
      callback()
    },

    onClose(session) {
      const client = admitted.get(session)
      if (client === undefined) return
      admitted.delete(session)
      connections.release(client)
    },

    onMailFrom(address, session, callback) {
      const unoffered = unofferedParameter(address.args, MAIL_PARAMETERS)
      if (unoffered) return callback(counted('unoffered_parameter', unoffered))
      accountOf.set(session, new Map())
      // RFC 5321 §4.5.5: the null sender (bounces, reports) is taken.
      if (address.address) {
        address.address = envelopeAddress(address.address)
        if (!isEmail(address.address))
          return callback(
            counted(
              'invalid_address',
              reply(553, `5.1.7 ${address.address} ${notAnEmail(address.address, 'is not a valid address')}`),
            ),
          )
      }
      // RFC 1870 §6.1: a declared SIZE that cannot be held now is refused at once.
      const declared = declaredSize(address.args)
      if (declared !== undefined && declared <= config.maxMessageSize && !budget.fits(declared, null))
        return callback(counted('busy', BUSY(452)))
      callback()
    },

    async onRcptTo(address, session, callback) {
      const refusals = refused.get(session) ?? 0
      if (refusals >= config.maxRecipients)
        return callback(
          counted(
            'harvest',
            reply(421, `4.7.0 ${refusals} recipients refused without a message accepted; closing the connection`),
          ),
        )
      const refuse = (reason: MxRefusalReason, err: Error) => {
        refused.set(session, refusals + 1)
        callback(counted(reason, err))
      }
      const to = envelopeAddress(address.address)
      address.address = to
      if (!isEmail(to))
        return refuse('invalid_address', reply(553, `5.1.3 ${to} ${notAnEmail(to, 'is not a valid address')}`))
      const rcpts = session.envelope.rcptTo
      const again = rcpts.some((r) => r.address.toLowerCase() === to.toLowerCase())
      if (!again && rcpts.length >= config.maxRecipients)
        return refuse(
          'too_many_recipients',
          reply(452, `4.5.3 Too many recipients: ${config.maxRecipients} per message`),
        )
      let found: InboundRecipient
      try {
        found = await inbound.recipient(to.toLowerCase(), deps.quota)
      } catch (err) {
        logger.error({ err }, 'MX recipient lookup failed')
        return callback(
          counted('temporary_failure', reply(451, '4.3.0 Temporary failure looking the recipient up; try again later')),
        )
      }
      switch (found.kind) {
        case 'inbox':
          accountOf.get(session)?.set(to.toLowerCase(), found.accountId)
          return callback()
        case 'full':
          // RFC 3463 §3.3: X.2.2, mailbox full; a 4xx, tried again later (RFC 5321 §4.2.5).
          return refuse('mailbox_full', reply(452, `4.2.2 Mailbox ${to} is full; try again later`))
        case 'unknown':
          return refuse('no_such_mailbox', reply(550, `5.1.1 No such mailbox: ${to}`))
        default:
          return refuse('relay_denied', reply(550, `5.7.1 ${to}: relay not permitted`))
      }
    },

    onData(stream, session, callback) {
      // A client trickling the message would hold its connection and its bytes for ever.
      const deadline = setTimeout(
        () =>
          closeWith(
            session,
            'data_timeout',
            `4.4.2 The message did not arrive within ${config.smtp.dataTimeout / 1000}s; closing the connection`,
          ),
        config.smtp.dataTimeout,
      ).unref()
      stream.once('close', () => clearTimeout(deadline))
      const recipients = session.envelope.rcptTo.map((r) => r.address.toLowerCase())
      const accounts = accountOf.get(session) ?? new Map<string, number>()
      const byAccount = groupByAccount(recipients, accounts)
      // Held in memory until stored: reserved from the budget every door shares, for the account
      // when the message is for one only.
      const declared = declaredSize(session.envelope.mailFrom ? session.envelope.mailFrom.args : false)
      const held = budget.reserve(
        declared !== undefined ? Math.min(declared, config.maxMessageSize) : FIRST_RESERVATION,
        byAccount.size === 1 ? [...byAccount.keys()][0] : null,
      )
      if (!held) return callback(counted('busy', BUSY()))
      const { body, dropped } = readWithin(stream, held)
      stream.on('end', async () => {
        clearTimeout(deadline)
        try {
          if (stream.sizeExceeded || dropped() === 'too_large')
            return callback(
              counted(
                'too_large',
                reply(552, `5.3.4 Message exceeds the maximum size of ${config.maxMessageSize} bytes`),
              ),
            )
          if (dropped() === 'busy') return callback(counted('busy', BUSY()))
          // The message stays in the parts it arrived in: never joined, never copied whole.
          const raw = body.take()
          body.clear()
          const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
          const remoteAddress = session.remoteAddress.replace(/^::ffff:/, '')
          const answer = await accept({ raw, mailFrom, remoteAddress, session, byAccount })
          if (answer.reason) return callback(counted(answer.reason, reply(answer.code, answer.text)))
          refused.delete(session)
          metrics?.received()
          callback(null, answer.text)
        } catch (err) {
          logger.error({ err }, 'MX intake failed')
          callback(counted('temporary_failure', reply(451, '4.3.0 The message could not be stored; try again later')))
        } finally {
          held.release()
        }
      })
    },
  })

  /** Checks, parses and stores a message that arrived whole; the reply to its end of data. */
  async function accept(message: {
    raw: Buffer[]
    mailFrom: string
    remoteAddress: string
    session: SMTPServerSession
    byAccount: Map<number, string[]>
  }): Promise<{ code: number; text: string; reason?: MxRefusalReason }> {
    const { raw, mailFrom, remoteAddress, session, byAccount } = message
    let auth: AuthVerdict
    try {
      auth = await verifyInbound({
        raw,
        mailFrom,
        remoteAddress,
        heloName: session.hostNameAppearsAs || remoteAddress,
        resolver: deps.resolver,
        hostname,
      })
    } catch (err) {
      logger.warn({ err, ip: remoteAddress }, 'MX authentication checks failed')
      return {
        code: 451,
        text: "4.4.3 The sender's domain could not be checked now; try again later",
        reason: 'checks_failed',
      }
    }
    if (dmarcRejects(auth)) {
      logger.info({ ip: remoteAddress, from: auth.dmarc.domain }, 'MX message refused: DMARC policy reject')
      return { code: 550, text: `5.7.1 ${dmarcReason(auth)}`, reason: 'dmarc_reject' }
    }
    // Parsed as received: the header on top changes nothing an agent reads.
    const parsed = await parseInbound(raw, mailFrom)
    const stored = withAuthResults(raw, auth.header, hostname)
    const receivedAt = clock()
    const ids: string[] = []
    const last = [...byAccount.keys()].at(-1)
    // One transaction per account; the 250 only once every one committed. A failure after one
    // committed is answered 451: the sender sends again, and that account may get it twice
    // (SMTP has one reply to a message, whatever the number of its recipients).
    for (const [accountId, recipients] of byAccount) {
      const rows = await inbound.receive({
        accountId,
        recipients,
        mailFrom,
        remoteAddress,
        receivedAt,
        // The receiver may take the pieces' memory over: each account but the last gets a copy.
        raw: accountId === last ? stored : stored.map((piece) => Buffer.from(piece)),
        parsed,
        auth,
      })
      ids.push(...rows.map((r) => r.id))
    }
    logger.info({ ip: remoteAddress, ids, recipients: byAccount.size }, 'MX message received')
    return { code: 250, text: `2.0.0 Message received as ${ids.slice(0, 10).join(' ')}` }
  }

  server.on('error', (err) => logger.error({ err }, 'MX server error'))
  return server
}

/** The recipients of the transaction grouped by the account each was accepted for. */
function groupByAccount(recipients: string[], accounts: Map<string, number>): Map<number, string[]> {
  const out = new Map<number, string[]>()
  for (const to of new Set(recipients)) {
    const id = accounts.get(to)
    if (id === undefined) continue
    out.set(id, [...(out.get(id) ?? []), to])
  }
  return out
}

/** Why DMARC refuses the message, as the sender's postmaster reads it in the bounce. */
function dmarcReason(auth: AuthVerdict): string {
  const dkim = auth.dkim.length ? auth.dkim.map((d) => `${d.result} (${d.domain})`).join(', ') : 'none'
  return `Message refused: the DMARC policy of ${auth.dmarc.domain} is reject, and it failed DMARC (SPF ${auth.spf.result} for ${auth.spf.domain ?? 'no domain'}, DKIM ${dkim})`
}

/**
 * The message as stored, in pieces: this MX's Authentication-Results on top, then the message
 * (itself, not a copy). One the message already carries in this MX's name is forged (RFC 8601
 * §5: it must be removed or renamed before a reader trusts it): it is renamed
 * X-Forged-Authentication-Results, in a copy of the header block only.
 */
export function withAuthResults(raw: Buffer | Buffer[], value: string, hostname: string): Buffer[] {
  const pieces = Array.isArray(raw) ? raw : [raw]
  const { head: headBytes, rest } = splitHead(pieces)
  const head = headBytes.toString('latin1')
  const ours = new RegExp(
    `^Authentication-Results:([ \\t]*(?:\\r?\\n[ \\t]+)*${regexEscape(hostname)}[ \\t\\r\\n]*;)`,
    'gim',
  )
  const cleaned = head.replace(ours, 'X-Forged-Authentication-Results:$1')
  const top = Buffer.from(`Authentication-Results: ${value}\r\n`, 'latin1')
  if (cleaned === head) return [top, ...pieces]
  return [top, Buffer.from(cleaned, 'latin1'), ...rest]
}

const regexEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
