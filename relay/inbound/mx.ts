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
import type { InboundRecipient, Store } from '../../storage/store.js'
import { FEEDBACK_MAX_BYTES } from './feedback.js'
import type { IntakeAnswer, MessageIntake } from './intake.js'

export interface MxDeps {
  /** Looks each recipient up at RCPT. */
  inbound: Pick<Store['inbound'], 'recipient'>
  /**
   * Checks, parses and stores a message once it arrived whole (inboundIntake): in this thread,
   * or in `mailroom serve` the engine thread's, which then owns the memory of its pieces.
   */
  intake: MessageIntake
  config: Pick<Config, 'smtp' | 'maxMessageSize' | 'maxRecipients'>
  /** This MX's public name, in its greeting. */
  hostname: string
  /** Bytes an inbox may hold (the inbox quota setting), asked about at each RCPT. */
  quota: number
  logger: Logger
  tls: { key: string | Buffer; cert: string | Buffer }
  /** Message bytes held in memory, shared with every other door of the process. */
  budget: ByteBudget
  /** Connections per client; the door's own when not given. */
  connections?: ConnectionCounter
  /** Where messages received and refusals are counted (GET /metrics). */
  metrics?: Pick<Metrics, 'received' | 'mxRefused'>
  /**
   * Mail to the return paths of MAILROOM_RETURN_PATH (`<token>@<label>.<domain>`): the delivery
   * row a local part names (undefined for one mailroom did not make), and what takes the report.
   */
  returnPaths?: {
    label: string
    open: Store['queue']['openReturnPathToken']
    intake: (message: { raw: Buffer[]; mailFrom: string; rows: number[] }) => Promise<IntakeAnswer>
  }
}

/** The delivery row a return-path address names, if it is one: `<token>@<label>.<domain>`. */
function returnPathRow(address: string, returnPaths: MxDeps['returnPaths']): number | undefined {
  if (!returnPaths) return undefined
  const at = address.lastIndexOf('@')
  const domain = address.slice(at + 1).toLowerCase()
  // The MAC covers the domain: a token is good only at the return path it was made for.
  if (!domain.startsWith(`${returnPaths.label}.`)) return undefined
  return returnPaths.open(address.slice(0, at), domain)
}

/** RFC 1870 SIZE and RFC 6152 BODY: no AUTH on the MX door, and no SMTPUTF8 or DSN. */
const MAIL_PARAMETERS: ReadonlySet<string> = new Set(['SIZE', 'BODY'])

/**
 * The MX door: the SMTP server the internet's mail arrives at, for the accounts' receiving
 * domains. No AUTH: a recipient that is no inbox is refused at RCPT (550 5.1.1), so nothing is
 * stored and no bounce is sent back to a forged sender; a domain no account receives for is
 * `550 5.7.1 relay not permitted`, so it is never an open relay. At the end of DATA the message
 * is handed to `intake` (checked, refused when its From domain's DMARC policy says reject,
 * otherwise stored for each account it is for), and only then answered.
 */
export function createMxServer(deps: MxDeps): SMTPServer {
  const { inbound, config, logger, budget, hostname, metrics } = deps
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
  // The delivery row of each return path accepted in it: a transaction is to inboxes or to return paths, not both.
  const rowsOf = new WeakMap<SMTPServerSession, Map<string, number>>()
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
      rowsOf.set(session, new Map())
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
      const rows = rowsOf.get(session)
      const inboxes = accountOf.get(session)
      const row = returnPathRow(to, deps.returnPaths)
      // A report is about one message's recipient: one return path a transaction (each is read
      // on this thread), and never mixed with mail to inboxes. A 452 has the client send the rest apart.
      if (row === undefined ? rows?.size && !again : (rows?.size || inboxes?.size) && !again)
        return callback(
          counted(
            'too_many_recipients',
            reply(
              452,
              row !== undefined && rows?.size
                ? '4.5.3 One return path per transaction: send the others in another one'
                : '4.5.3 Reports to a return path and mail to inboxes go in separate transactions',
            ),
          ),
        )
      if (row !== undefined) {
        rows?.set(to.toLowerCase(), row)
        return callback()
      }
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
      // A report to a return path is small: past FEEDBACK_MAX_BYTES it is dropped as it arrives, not held.
      const reportRows = [...(rowsOf.get(session)?.values() ?? [])]
      const limit = reportRows.length ? FEEDBACK_MAX_BYTES : config.maxMessageSize
      const held = budget.reserve(
        declared !== undefined ? Math.min(declared, limit) : FIRST_RESERVATION,
        byAccount.size === 1 ? [...byAccount.keys()][0] : null,
      )
      if (!held) return callback(counted('busy', BUSY()))
      // Kept in the chunks it arrives in: checked and parsed in place, then stored (bodyParts
      // joins the small ones), never copied whole.
      const { body, dropped } = readWithin(stream, held, { keep: true, max: limit })
      stream.on('end', async () => {
        clearTimeout(deadline)
        try {
          if (stream.sizeExceeded || dropped() === 'too_large')
            return callback(
              counted(
                'too_large',
                reply(
                  552,
                  reportRows.length
                    ? `5.3.4 A report to a return path is at most ${FEEDBACK_MAX_BYTES} bytes`
                    : `5.3.4 Message exceeds the maximum size of ${config.maxMessageSize} bytes`,
                ),
              ),
            )
          if (dropped() === 'busy') return callback(counted('busy', BUSY()))
          if (reportRows.length && deps.returnPaths) {
            const answer = await deps.returnPaths.intake({
              raw: body.take(),
              mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              rows: reportRows,
            })
            body.clear()
            if (answer.reason) return callback(counted(answer.reason, reply(answer.code, answer.text)))
            refused.delete(session)
            return callback(null, answer.text)
          }
          // The message stays in the parts it arrived in: never joined, never copied whole.
          const raw = body.take()
          body.clear()
          const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
          const remoteAddress = session.remoteAddress.replace(/^::ffff:/, '')
          const answer = await deps.intake({
            raw,
            mailFrom,
            remoteAddress,
            heloName: session.hostNameAppearsAs || remoteAddress,
            byAccount: [...byAccount],
          })
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
