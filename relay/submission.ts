import { SMTPServer, type SMTPServerSession } from 'smtp-server'
import { timingSafeEqual } from 'node:crypto'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import { MailroomError, asMailroomError, smtpReply } from '../errors.js'
import type { MailOrder, Store } from '../storage/store.js'
import { isEmail, notAnEmail } from './addresses.js'
import { authClient, authFailureCount } from './auth-throttle.js'
import { messageHead, missingHeaders, readHeaders } from './message.js'
import type { Relay } from './pipeline.js'
import type { BoundPolicy } from './policy.js'
import type { ByteBudget } from './byte-budget.js'
import { Refusal, type RefusalReason } from './refusal.js'
import {
  BUSY,
  connectionCounter,
  declaredSize,
  envelopeAddress,
  FIRST_RESERVATION,
  readWithin,
  reply,
  unofferedParameter,
} from './smtp-door.js'

/**
 * What the submission servers of one process count together, so that a client reaching both the
 * STARTTLS port and the implicit-TLS one gets one share of connections, not two. (AUTH guesses are
 * counted in the store, for every port and node together.)
 */
export interface SubmissionLimits {
  connections: ReturnType<typeof connectionCounter>
}

export function submissionLimits(config: Pick<Config, 'smtp'>): SubmissionLimits {
  return { connections: connectionCounter(config.smtp.maxClientsPerAddress) }
}

export interface SubmissionDeps {
  store: Store
  relay: Relay
  config: Pick<Config, 'smtp' | 'maxMessageSize' | 'maxRecipients' | 'nodeName'>
  logger: Logger
  clock: () => number
  tls: { key: string | Buffer; cert: string | Buffer }
  /** Message bytes held in memory, shared with every other door of the process. */
  budget: ByteBudget
  /** Shared with the process's other submission server; its own when not given. */
  limits?: SubmissionLimits
  /** Where sessions and the refusals of the envelope's commands are counted, if anywhere. */
  metrics?: Pick<Metrics, 'refused' | 'smtpSessionOpened' | 'smtpSessionClosed'>
}

/** A MailroomError as the SMTP reply of its code (e.g. a deny rule → 550 5.7.1). */
const asReply = (err: unknown) => {
  const r = smtpReply(asMailroomError(err))
  return reply(r.code, r.message)
}

/**
 * The MAIL FROM parameters this server offers: SIZE (RFC 1870), BODY (8BITMIME, RFC 6152) and
 * AUTH (RFC 4954 §5). SMTPUTF8 and DSN's RET and ENVID are not offered here.
 */
const MAIL_PARAMETERS: ReadonlySet<string> = new Set(['SIZE', 'BODY', 'AUTH'])

const AUTH_REQUIRED = () => reply(530, '5.7.0 Authentication required')

/**
 * The SMTP submission server: AUTH PLAIN/LOGIN as mb<id> with the order's password, then the
 * same sending pipeline as REST and MCP. Sender checks answer at MAIL FROM, destination rules at
 * each RCPT TO, and `250 Message queued as <id>` (or `held as <id>` under the order's send policy,
 * docs/approval.md) comes only after the commit. Without AUTH every MAIL and RCPT is refused:
 * never an open relay. With `secure`, the connection is TLS from its first byte (implicit TLS,
 * RFC 8314 §3.3) instead of upgraded by STARTTLS.
 */
export function createSubmissionServer(deps: SubmissionDeps, options: { secure?: boolean } = {}): SMTPServer {
  const { store, relay, config, logger, clock, metrics, budget } = deps
  /** Counts a refusal at MAIL FROM, RCPT TO or the end of DATA that the pipeline's submit does not count itself. */
  const counted = <E>(err: E, reason?: RefusalReason): E => {
    const why = reason ?? (err instanceof Refusal ? err.reason : undefined)
    if (why) metrics?.refused('smtp', why)
    return err
  }
  const { connections } = deps.limits ?? submissionLimits(config)
  // Counted in the store: guesses spread over both ports and every node meet one limit.
  const authFailures = authFailureCount(store, 'smtp', config.smtp.maxAuthFailures, clock)
  // Recipients refused on each connection since it last had a message accepted. Each refusal a
  // rule or a block list makes is recorded (a write to the database): a client that keeps going
  // past as many refusals as one message may have recipients is cut off, as Postfix does past its
  // error limit.
  const refused = new WeakMap<object, number>()
  const orderOf = (session: SMTPServerSession) => (session.user as { order: MailOrder } | undefined)?.order
  // The client each counted connection is counted for, and the deadline it has to authenticate by.
  const admitted = new WeakMap<SMTPServerSession, { client: string; deadline: NodeJS.Timeout }>()
  const unauthenticatedTimeout = config.smtp.unauthenticatedTimeout
  /** Ends a session with a 421 and this text (smtp-server closes the connection after a 421). */
  const closeWith = (session: SMTPServerSession, text: string) => {
    for (const connection of server.connections) if (connection.session === session) connection.send(421, text, false)
  }
  /** Ends a session that is still not authenticated at its deadline. */
  const expire = (session: SMTPServerSession) =>
    closeWith(session, `4.7.0 Not authenticated within ${unauthenticatedTimeout / 1000}s; closing the connection`)

  const server = new SMTPServer({
    name: config.nodeName,
    // smtp-server writes `220 <name> ESMTP ` before it.
    banner: 'mailroom submission',
    key: deps.tls.key,
    cert: deps.tls.cert,
    secure: options.secure ?? false,
    size: config.maxMessageSize,
    // MAILROOM_MAX_RECIPIENTS is counted at RCPT TO below, so that the refusal has its enhanced code.
    authMethods: ['PLAIN', 'LOGIN'],
    // AUTH is checked at MAIL and RCPT ourselves, so the refusal is the precise 530 5.7.0.
    authOptional: true,
    allowInsecureAuth: !config.smtp.authRequiresTls,
    disableReverseLookup: true,
    maxClients: config.smtp.maxClients,
    hideDSN: true,
    // Addresses are ASCII here (internationalized domains as punycode): SMTPUTF8 is not offered.
    hideSMTPUTF8: true,
    // RFC 8689: delivery uses opportunistic TLS without checking certificates, so it cannot keep
    // the promise REQUIRETLS asks for.
    hideREQUIRETLS: true,
    logger: false,

    onConnect(session, callback) {
      const client = authClient(session.remoteAddress)
      if (!connections.take(client)) {
        logger.warn({ ip: session.remoteAddress }, 'SMTP connection refused: too many from the client')
        return callback(reply(421, `4.7.0 Too many connections from ${client}; try again later`))
      }
      // A session can do nothing before AUTH (every MAIL and RCPT is refused), so one that has not
      // logged in soon after connecting only holds a slot: it gets much less time than smtp-server's
      // 60s idle timeout, and its NOOPs or failed AUTHs do not buy it more.
      const deadline = setTimeout(() => expire(session), unauthenticatedTimeout).unref()
      admitted.set(session, { client, deadline })
      metrics?.smtpSessionOpened()
      callback()
    },

    onClose(session) {
      const counted = admitted.get(session)
      if (!counted) return
      clearTimeout(counted.deadline)
      admitted.delete(session)
      connections.release(counted.client)
      metrics?.smtpSessionClosed()
    },

    async onAuth(auth, session, callback) {
      const ip = session.remoteAddress
      if ((await authFailures.throttledUntil(ip).catch(() => undefined)) !== undefined)
        return callback(reply(454, '4.7.0 Too many failed authentication attempts; try again later'))
      // RFC 4616: an authorization identity other than the authentication identity asks to act as
      // another user, which no order may do. (One given alone, authcid empty, is the username.)
      const { authzid, authcid } = auth as { authzid?: string; authcid?: string }
      if (authzid && authcid && authzid !== authcid)
        return callback(reply(535, `5.7.8 ${authcid} may not act as ${authzid}`))
      try {
        // Only the username as written for the order (mb<id>, no leading zeros) names it: mb02 is
        // refused like any other unknown user, and counted as a failure.
        const id = /^mb([1-9]\d*)$/.exec(auth.username ?? '')?.[1]
        const order = id ? await store.orders.get(Number(id)) : undefined
        const valid =
          order &&
          auth.password !== undefined &&
          auth.password !== null &&
          safeEqual(await store.orders.password(order.id), auth.password)
        if (!order || !valid) {
          await authFailures.fail(ip)
          logger.warn({ ip, username: auth.username }, 'SMTP authentication failed')
          return callback(reply(535, '5.7.8 Authentication credentials invalid'))
        }
        if (order.status !== 'active') return callback(reply(535, `5.7.8 Mail order mb${order.id} is canceled`))
        // A success does not clear the address's failures: one valid login must not make room
        // for more guesses at other orders. They expire with the window.
        clearTimeout(admitted.get(session)?.deadline)
        callback(null, { user: { order } })
      } catch (err) {
        logger.error({ err }, 'SMTP authentication error')
        callback(reply(454, '4.7.0 Temporary authentication failure'))
      }
    },

    async onMailFrom(address, session, callback) {
      const order = orderOf(session)
      if (!order) return callback(AUTH_REQUIRED())
      const unoffered = unofferedParameter(address.args, MAIL_PARAMETERS)
      if (unoffered) return callback(unoffered)
      if (!address.address) return callback(reply(553, '5.1.7 A sender address is required'))
      address.address = envelopeAddress(address.address)
      if (!isEmail(address.address))
        return callback(reply(553, `5.1.7 ${address.address} ${notAnEmail(address.address, 'is not a valid address')}`))
      try {
        // The order may have been canceled or changed since AUTH: read it again.
        const current = await store.orders.get(order.id)
        if (current?.status !== 'active')
          return callback(counted(reply(550, `5.7.1 Mail order mb${order.id} is canceled`), 'order_canceled'))
        ;(session.user as { order: MailOrder }).order = current
        // RFC 1870 §6.1: a declared SIZE the server cannot take now is refused at once, with 452,
        // rather than read to its end and refused then. It is reserved only at DATA: it may still
        // not fit then, and is answered 451 after its data.
        const declared = declaredSize(address.args)
        if (declared !== undefined && declared <= config.maxMessageSize && !budget.fits(declared, current.accountId))
          return callback(BUSY(452))
        await relay.checkSender(current, address.address)
        callback()
      } catch (err) {
        callback(asReply(counted(err)))
      }
    },

    async onRcptTo(address, session, callback) {
      const order = orderOf(session)
      if (!order) return callback(AUTH_REQUIRED())
      const refusals = refused.get(session) ?? 0
      if (refusals >= config.maxRecipients) {
        return callback(
          reply(421, `4.7.0 ${refusals} recipients refused without a message accepted; closing the connection`),
        )
      }
      const refuse = (err: Error) => {
        refused.set(session, refusals + 1)
        callback(err)
      }
      address.address = envelopeAddress(address.address)
      if (!isEmail(address.address))
        return refuse(reply(553, `5.1.3 ${address.address} ${notAnEmail(address.address, 'is not a valid address')}`))
      const rcpts = session.envelope.rcptTo
      const again = rcpts.some((r) => r.address.toLowerCase() === address.address.toLowerCase())
      if (!again && rcpts.length >= config.maxRecipients) {
        return refuse(
          counted(reply(452, `4.5.3 Too many recipients: ${config.maxRecipients} per message`), 'too_many_recipients'),
        )
      }
      // A bulk order's message goes to one recipient, with its own unsubscribe link: the client
      // sends the others in further transactions (RFC 5321 §4.5.3.1.10), as a 452 asks of it.
      if (!again && order.list && rcpts.length >= 1) {
        return callback(
          counted(
            reply(
              452,
              '4.5.3 This mail order sends bulk mail: one recipient per message, each with its own unsubscribe link',
            ),
            'bulk_recipients',
          ),
        )
      }
      try {
        // A recipient the order's send policy does not allow is refused here, not after the data.
        await relay.checkRecipient(order, address.address, {
          envFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          policy: orderPolicy(order),
        })
        callback()
      } catch (err) {
        refuse(asReply(counted(err)))
      }
    },

    onData(stream, session, callback) {
      // The socket's idle timeout starts again with each byte: a client trickling the message
      // would hold its connection, and what it sent, for ever. The whole DATA has a deadline.
      const deadline = setTimeout(
        () =>
          closeWith(
            session,
            `4.4.2 The message did not arrive within ${config.smtp.dataTimeout / 1000}s; closing the connection`,
          ),
        config.smtp.dataTimeout,
      ).unref()
      stream.once('close', () => clearTimeout(deadline))
      const order = orderOf(session)!
      // The message's bytes are held in memory until the commit: they are reserved from the
      // budget every door shares, for the order's account, before any is kept. A declared SIZE
      // (RFC 1870) is reserved whole; without one, a little, and more as the bytes arrive.
      const declared = declaredSize(session.envelope.mailFrom ? session.envelope.mailFrom.args : false)
      const held = budget.reserve(
        declared !== undefined ? Math.min(declared, config.maxMessageSize) : FIRST_RESERVATION,
        order.accountId,
      )
      // smtp-server has already decided to answer 354 (it has no hook before that reply), so the
      // refusal is the reply to the end of the data: it reads the message and drops it meanwhile.
      if (!held) return callback(BUSY())
      const { body, dropped } = readWithin(stream, held)
      stream.on('end', async () => {
        clearTimeout(deadline)
        try {
          if (stream.sizeExceeded || dropped() === 'too_large')
            return callback(
              counted(
                reply(552, `5.3.4 Message exceeds the maximum size of ${config.maxMessageSize} bytes`),
                'too_large',
              ),
            )
          if (dropped() === 'busy') return callback(BUSY())
          const raw = body.take()
          const ip = session.remoteAddress.replace(/^::ffff:/, '')
          const headers = readHeaders(messageHead(raw), 'message')
          const envFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
          // As a submission server (RFC 6409 §8.2, §8.3), the Date or Message-ID a message lacks is added.
          const txid = relay.newTxid()
          const added = missingHeaders(headers, txid, new Date(clock()), headers.from ?? envFrom)
          // The order may have been canceled, or its senders or send policy changed, since MAIL FROM.
          const current = (await store.orders.get(order.id)) ?? order
          const { hold } = await relay.submit({
            txid,
            order: current,
            envFrom,
            recipients: session.envelope.rcptTo.map((r) => r.address),
            headerFrom: headers.from,
            replyTo: headers.replyTo,
            subject: headers.subject,
            messageId: added.messageId,
            inReplyTo: headers.inReplyTo,
            raw,
            added: added.lines,
            origin: ip,
            transtype: session.secure ? 'ESMTPSA' : 'ESMTPA',
            interface: 'feeder',
            received: { helo: session.hostNameAppearsAs || 'unknown', ip },
            // SMTP has no key: the order's policy is the one its submissions are held to.
            policy: orderPolicy(current),
          })
          refused.delete(session)
          callback(
            null,
            hold
              ? `Message held as ${txid}: waiting for a person's approval until ${new Date(hold.expiresAt).toISOString()} (${hold.approvalUrl})`
              : `Message queued as ${txid}`,
          )
        } catch (err) {
          if (!(err instanceof MailroomError)) logger.error({ err }, 'SMTP submission failed')
          callback(asReply(err))
        } finally {
          // Committed or refused, the bytes are no longer this door's to hold.
          held.release()
        }
      })
    },
  })
  server.on('error', (err) => logger.error({ err }, 'SMTP server error'))
  return server
}

/** The send policy of an order's SMTP submissions, if it has one. */
const orderPolicy = (order: MailOrder): BoundPolicy | undefined =>
  order.policy ? { holder: { kind: 'order', id: order.id }, rules: order.policy } : undefined

/** Whether a password given matches the order's, in a time that does not tell how much of it did. */
function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
