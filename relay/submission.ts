import { SMTPServer, type SMTPServerSession } from 'smtp-server'
import { timingSafeEqual } from 'node:crypto'
import type { Logger } from 'pino'
import { domainToASCII } from 'node:url'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import { MailroomError, asMailroomError, smtpReply } from '../errors.js'
import type { MailOrder, Store } from '../storage/store.js'
import { canonicalAddress, isAscii, isEmail, notAnEmail } from './addresses.js'
import { authClient, authThrottle } from './auth-throttle.js'
import { messageHead, missingHeaders, readHeaders } from './message.js'
import type { Relay } from './pipeline.js'
import { Refusal, type RefusalReason } from './refusal.js'

/**
 * SMTP connections open per client (authClient), so that one address cannot hold every slot of
 * MAILROOM_SMTP_MAX_CLIENTS and lock everyone else out, as Postfix's
 * smtpd_client_connection_count_limit does. A client's count is dropped when it has none open.
 */
function connectionCounter(max: number) {
  const open = new Map<string, number>()
  return {
    /** Counts a new connection of the client and returns true, or returns false when it already has `max` open. */
    take(client: string): boolean {
      const n = open.get(client) ?? 0
      if (n >= max) return false
      open.set(client, n + 1)
      return true
    },
    release(client: string): void {
      const n = open.get(client) ?? 0
      if (n <= 1) open.delete(client)
      else open.set(client, n - 1)
    },
  }
}

/**
 * What the submission servers of one process count together, so that a client reaching both the
 * STARTTLS port and the implicit-TLS one gets one share of connections and AUTH guesses, not two.
 */
export interface SubmissionLimits {
  connections: ReturnType<typeof connectionCounter>
  authFailures: ReturnType<typeof authThrottle>
}

export function submissionLimits(config: Pick<Config, 'smtp'>, clock: () => number): SubmissionLimits {
  return {
    connections: connectionCounter(config.smtp.maxClientsPerAddress),
    authFailures: authThrottle(config.smtp.maxAuthFailures, clock),
  }
}

export interface SubmissionDeps {
  store: Store
  relay: Relay
  config: Pick<Config, 'smtp' | 'maxMessageSize' | 'maxRecipients' | 'nodeName'>
  logger: Logger
  clock: () => number
  tls: { key: string | Buffer; cert: string | Buffer }
  /** Shared with the process's other submission server; its own when not given. */
  limits?: SubmissionLimits
  /** Where sessions and the refusals of the envelope's commands are counted, if anywhere. */
  metrics?: Pick<Metrics, 'refused' | 'smtpSessionOpened' | 'smtpSessionClosed'>
}

/**
 * An envelope address as the relay keeps it: its domain in ASCII (smtp-server hands over a
 * punycode domain, xn--…, turned into Unicode, which is not what the client sent and not what the
 * MX expects), and a quoted local part in its canonical form (canonicalAddress).
 */
function envelopeAddress(address: string): string {
  const at = address.lastIndexOf('@')
  const ascii =
    at < 0 || isAscii(address)
      ? address
      : `${address.slice(0, at)}@${domainToASCII(address.slice(at + 1)) || address.slice(at + 1)}`
  return canonicalAddress(ascii)
}

/** An error smtp-server answers with the given reply code. */
const reply = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code })

/** A MailroomError as the SMTP reply of its code (e.g. a deny rule → 550 5.7.1). */
const asReply = (err: unknown) => {
  const r = smtpReply(asMailroomError(err))
  return reply(r.code, r.message)
}

const AUTH_REQUIRED = () => reply(530, '5.7.0 Authentication required')

/**
 * The MAIL FROM parameters this server offers: SIZE (RFC 1870), BODY (8BITMIME, RFC 6152) and
 * AUTH (RFC 4954 §5). smtp-server accepts any other: SMTPUTF8 and DSN's RET and ENVID are not
 * offered here, and a server must not take what it did not advertise (RFC 5321 §4.1.1.11).
 */
const MAIL_PARAMETERS = new Set(['SIZE', 'BODY', 'AUTH'])

/** A 555 5.5.4 for the first MAIL FROM parameter not offered, if any. */
function unofferedParameter(args: Record<string, unknown> | false | undefined): Error | undefined {
  const name = Object.keys(args || {}).find((key) => !MAIL_PARAMETERS.has(key))
  if (name === undefined) return undefined
  return reply(555, `5.5.4 MAIL FROM parameter ${name.slice(0, 64)} is not supported (offered: SIZE, BODY, AUTH)`)
}

/**
 * The SMTP submission server: AUTH PLAIN/LOGIN as mb<id> with the order's password, then the
 * same sending pipeline as REST and MCP. Sender checks answer at MAIL FROM, destination rules at
 * each RCPT TO, and `250 Message queued as <id>` comes only after the commit. Without AUTH
 * every MAIL and RCPT is refused: never an open relay. With `secure`, the connection is TLS from
 * its first byte (implicit TLS, RFC 8314 §3.3) instead of upgraded by STARTTLS.
 */
export function createSubmissionServer(deps: SubmissionDeps, options: { secure?: boolean } = {}): SMTPServer {
  const { store, relay, config, logger, clock, metrics } = deps
  /** Counts a refusal at MAIL FROM, RCPT TO or the end of DATA that the pipeline's submit does not count itself. */
  const counted = <E>(err: E, reason?: RefusalReason): E => {
    const why = reason ?? (err instanceof Refusal ? err.reason : undefined)
    if (why) metrics?.refused('smtp', why)
    return err
  }
  const { connections, authFailures } = deps.limits ?? submissionLimits(config, clock)
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
      if (authFailures.throttled(ip))
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
          authFailures.fail(ip)
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
      const unoffered = unofferedParameter(address.args)
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
      try {
        await relay.checkRecipient(order, address.address, {
          envFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
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
      const body = new MessageBuffer()
      stream.on('data', (chunk: Buffer) => {
        // Past the limit the rest is read and dropped: nothing beyond it is held in memory.
        if (!stream.sizeExceeded) body.push(chunk)
      })
      stream.on('end', async () => {
        clearTimeout(deadline)
        if (stream.sizeExceeded)
          return callback(
            counted(
              reply(552, `5.3.4 Message exceeds the maximum size of ${config.maxMessageSize} bytes`),
              'too_large',
            ),
          )
        try {
          const raw = body.take()
          const ip = session.remoteAddress.replace(/^::ffff:/, '')
          const headers = readHeaders(messageHead(raw), 'message')
          const envFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
          // As a submission server (RFC 6409 §8.2, §8.3), the Date or Message-ID a message lacks is added.
          const txid = relay.newTxid()
          const added = missingHeaders(headers, txid, new Date(clock()), headers.from ?? envFrom)
          // The order may have been canceled, or its senders changed, since MAIL FROM.
          const order = orderOf(session)!
          await relay.submit({
            txid,
            order: (await store.orders.get(order.id)) ?? order,
            envFrom,
            recipients: session.envelope.rcptTo.map((r) => r.address),
            headerFrom: headers.from,
            replyTo: headers.replyTo,
            subject: headers.subject,
            messageId: added.messageId,
            raw,
            added: added.lines,
            origin: ip,
            transtype: session.secure ? 'ESMTPSA' : 'ESMTPA',
            interface: 'feeder',
            received: { helo: session.hostNameAppearsAs || 'unknown', ip },
          })
          refused.delete(session)
          callback(null, `Message queued as ${txid}`)
        } catch (err) {
          if (!(err instanceof MailroomError)) logger.error({ err }, 'SMTP submission failed')
          callback(asReply(err))
        }
      })
    },
  })
  server.on('error', (err) => logger.error({ err }, 'SMTP server error'))
  return server
}

/**
 * The bytes of a message as they arrive, kept as the chunks smtp-server hands over. Those are
 * already its own copies (it joins each chunk it reads to the end of the one before while it
 * looks for the end of the data), so a large message is held once, not copied again into one
 * buffer, and goes to the queue in those pieces.
 */
class MessageBuffer {
  private pieces: Buffer[] = []

  push(chunk: Buffer): void {
    this.pieces.push(chunk)
  }

  /**
   * The pieces, theirs to hand over. smtp-server goes on to read what the client sent after the
   * message from the memory of the last chunk, so the pieces in that memory are copied out.
   */
  take(): Buffer[] {
    const last = this.pieces.at(-1)?.buffer
    return this.pieces.map((piece) => (piece.buffer === last ? Buffer.from(piece) : piece))
  }
}

/** Whether a password given matches the order's, in a time that does not tell how much of it did. */
function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
