import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { MailroomError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import {
  byteLength,
  type DenyRule,
  type Hold,
  holderKey,
  holderLabel,
  type MailOrder,
  type NewMessage,
  newEventId,
  type Store,
} from '../storage/store.js'
import { findDenyRule, senderAuthorized } from './deny-rules.js'
import { signMessage } from './dkim.js'
import { receivedHeader } from './message.js'
import { approvalReason, approvalUrlOf, type BoundPolicy, checkAllowed, takeSend } from './policy.js'
import { Refusal, refusal } from './refusal.js'
import { createSpamFilter } from './spam-filter.js'
import { createTxidGenerator } from './txid.js'
import { bulkMail } from './unsubscribe.js'

export interface Submission {
  order: MailOrder
  envFrom: string
  recipients: string[]
  /** The From header's (first) address, the log's `headerfrom`. */
  headerFrom: string | null
  /**
   * Every address of the From header, when it may hold more than one (a raw send). An API send's
   * authors are checked like its envelope sender; when absent, `headerFrom` is its one author.
   */
  authors?: string[]
  replyTo: string | null
  subject: string | null
  messageId: string | null
  /**
   * The Message-ID its In-Reply-To names (with or without < >): a send that answers a message of
   * the account, received or sent, joins that message's thread once queued.
   */
  inReplyTo?: string | null
  /** The message's bytes in pieces (see NewMessage.raw); their memory is handed over. */
  raw: Buffer[]
  origin: string
  /** ESMTPSA, ESMTPA or HTTP */
  transtype: string
  /** feeder (SMTP) or api */
  interface: 'feeder' | 'api'
  /** A transaction id taken earlier with newTxid() (API sends put it in the Message-ID). */
  txid?: string
  /**
   * For a message taken in over SMTP: its Received line (RFC 5321 §4.4) is put in front of it
   * once it passed the checks (its size is the size the client sent).
   */
  received?: { helo: string; ip: string }
  /**
   * Header lines put in front of the message (after its Received line) once it passed the checks:
   * the Date or Message-ID it lacks. Like the Received line, not counted against the size limit.
   */
  added?: string
  /**
   * Bulk mail (a send's `list`, or its order's): its one recipient gets a one-click unsubscribe
   * link (relay/unsubscribe.ts). Transactional mail, the default, carries none.
   */
  list?: boolean
  /** The input field each recipient (lower case) came from, when not all from `to` (cc, bcc), for refusals to name. */
  recipientFields?: Map<string, string>
  /**
   * Sent with a sandbox API key (REST, MCP). The message is sandbox mail when this is set or its
   * order is a sandbox order: the key decides over REST and MCP, the order over SMTP (which has no
   * key), and a sandbox order's mail is sandbox mail whatever the door.
   */
  sandbox?: boolean
  /**
   * The send policy the sender is held to (docs/approval.md): its API key's or OAuth grant's over
   * REST and MCP, the order's over SMTP. None: no recipient limit, no counting, nothing held.
   */
  policy?: BoundPolicy
}

/** What became of a submitted message: queued, or held for a person's approval (`hold`). */
export interface Submitted {
  txid: string
  hold: Hold | null
}

export interface Relay {
  newTxid(): string
  /**
   * Authorized senders and sender deny rules, for the envelope sender and the given authors (the
   * From header's addresses); throws a MailroomError with the SMTP reply to use.
   */
  checkSender(order: MailOrder, envFrom: string, authors?: string[], rules?: DenyRule[]): Promise<void>
  /**
   * The send policy's allowed recipients, recipient deny rules and the spam filter's recipient
   * checks. `message` is what is known of the message (at SMTP RCPT TO: only the sender).
   */
  checkRecipient(
    order: MailOrder,
    recipient: string,
    message: {
      envFrom: string
      subject?: string | null
      messageId?: string | null
      field?: string
      policy?: BoundPolicy
    },
    rules?: DenyRule[],
  ): Promise<void>
  /**
   * The one sending pipeline of every door: authorized sender, deny rules, spam filter, the send
   * policy, then the message and its log rows are committed to the durable queue, or stored held
   * for a person's approval. Resolves only after the commit.
   */
  submit(submission: Submission): Promise<Submitted>
}

/**
 * The pipeline's writes to the queue: accepted messages, and the spam filter's events (written as
 * often as messages). They go where the deployment puts them (the relay engine's own connection
 * in `mailroom serve`; the store itself elsewhere); see storeIntake.
 */
export interface Intake {
  enqueue(message: NewMessage): Promise<{ rowId: number }>
  addEvent: Store['blocks']['addEvent']
  takeSubject: Store['blocks']['takeSubject']
  /** Refused sends, counted in the volume index with their webhook events (message.refused). */
  refuse: Store['mail']['refuse']
}

/** The store's own writes as the intake (no relay engine: the tools' tests, the admin command). */
export const storeIntake = (store: Store): Intake => ({
  enqueue: (message) => store.mail.enqueue(message),
  addEvent: (accountId, event) => store.blocks.addEvent(accountId, event),
  takeSubject: (...args) => store.blocks.takeSubject(...args),
  refuse: (refused) => store.mail.refuse(refused),
})

export interface RelayDeps {
  store: Store
  /** Where accepted messages and spam-filter events are written; the store's own writes unless given. */
  intake?: Intake
  config: Pick<Config, 'maxMessageSize' | 'maxRecipients' | 'nodeName' | 'publicUrl' | 'approval'>
  logger: Logger
  clock: () => number
  /** Where accepted and refused messages are counted, if anywhere. */
  metrics?: Pick<Metrics, 'accepted' | 'refused'>
}

const DENIED = { code: 550, enhanced: '5.7.1' }

export function createRelay({ store, intake = storeIntake(store), config, logger, clock, metrics }: RelayDeps): Relay {
  const newTxid = createTxidGenerator()
  const bulkMails = bulkMail({ store: store.blocks, publicUrl: config.publicUrl, logger })
  const filter = createSpamFilter({ store, intake, logger, clock })

  /**
   * Runs a check by the deny rules or the spam filter; a refusal it decides is counted in the
   * order's volume and told to the account's webhooks that take message.refused (written before
   * the refusal is answered), then thrown.
   */
  const refusing = async (
    order: MailOrder,
    about: { envFrom: string; recipient: string | null; subject?: string | null; messageId?: string | null },
    check: () => Promise<void>,
  ): Promise<void> => {
    try {
      await check()
    } catch (err) {
      if (!(err instanceof MailroomError)) throw err
      const time = clock()
      const code = err.smtp?.code ?? 550
      const events = (await store.webhooks.subscribed(order.accountId, 'message.refused'))
        ? [
            {
              id: newEventId(),
              type: 'message.refused' as const,
              accountId: order.accountId,
              time,
              data: {
                transactionId: null,
                recipient: about.recipient,
                from: about.envFrom,
                subject: about.subject ?? null,
                messageId: about.messageId ?? null,
                code,
                response: `${code} ${err.smtp?.enhanced ?? '5.7.1'} ${err.message}`,
                mxHost: null,
                attempt: 0,
              },
            },
          ]
        : []
      await intake
        .refuse({ orderId: order.id, time, events })
        .catch((e) => logger.error({ err: e, account: order.accountId }, 'recording a refusal failed'))
      throw err
    }
  }

  /**
   * Puts a queued send in the thread of the message it answers. Only asked when the message has an
   * In-Reply-To; a failure leaves the message sent and out of the thread (logged), never refused.
   */
  const joinThread = async (accountId: number, txid: string, messageId: string, inReplyTo: string) => {
    try {
      const threadId = await store.inbound.linkReply({ accountId, messageId, inReplyTo })
      if (threadId) logger.debug({ txid, thread: threadId }, 'send joined a thread')
    } catch (err) {
      logger.error({ err, txid }, 'putting a send in its thread failed')
    }
  }

  const relay: Relay = {
    newTxid: () => newTxid(clock()),

    async checkSender(order, envFrom, authors = [], rules) {
      // Over SMTP (at MAIL FROM, or at the end of DATA when it was canceled meanwhile) a 550:
      // RFC 5321 has no 535 for these commands.
      if (order.status !== 'active')
        throw new Refusal('order_canceled', 404, `mail order mb${order.id} is canceled`, {
          code: 550,
          enhanced: '5.7.1',
        })
      const senders = new Set([envFrom, ...authors])
      for (const address of senders) {
        if (!senderAuthorized(order.senders, address)) {
          throw refusal(
            'sender_not_authorized',
            `from: ${address} is not an authorized sender of mail order mb${order.id} (allowed: ${order.senders.join(', ')})`,
            { code: 553, enhanced: '5.7.1' },
          )
        }
      }
      const denyRules = rules ?? (await store.rules.list([order.id]))
      await refusing(order, { envFrom, recipient: null }, async () => {
        for (const address of senders) {
          const rule = findDenyRule(denyRules, 'sender', address)
          if (rule)
            throw refusal(
              'deny_rule',
              `from: sender ${address} is rejected by deny rule ${rule.id} (${rule.type} ${rule.data})`,
              DENIED,
            )
        }
        await filter.checkSender(order.accountId, envFrom)
      })
    },

    async checkRecipient(order, recipient, message, rules) {
      const rule = findDenyRule(rules ?? (await store.rules.list([order.id])), 'recipient', recipient)
      const field = message.field ?? 'to'
      await refusing(order, { ...message, recipient }, async () => {
        if (message.policy) checkAllowed(message.policy, recipient, field)
        if (rule)
          throw refusal(
            'deny_rule',
            `${field}: recipient ${recipient} is rejected by deny rule ${rule.id} (${rule.type} ${rule.data})`,
            DENIED,
          )
        await filter.checkRecipient(
          {
            accountId: order.accountId,
            envFrom: message.envFrom,
            subject: message.subject ?? null,
            messageId: message.messageId ?? null,
            field,
          },
          recipient,
        )
      })
    },

    async submit(s) {
      const size = byteLength(s.raw)
      if (size > config.maxMessageSize) {
        throw new Refusal('too_large', 413, `the message is ${size} bytes; the limit is ${config.maxMessageSize}`, {
          code: 552,
          enhanced: '5.3.4',
        })
      }
      if (s.recipients.length === 0) throw refusal('no_recipients', 'to: the message has no recipients')
      if (s.recipients.length > config.maxRecipients) {
        throw refusal(
          'too_many_recipients',
          `to: ${s.recipients.length} recipients; the limit is ${config.maxRecipients} per message`,
          { code: 452, enhanced: '4.5.3' },
        )
      }
      const bulk = s.list === true || s.order.list === true
      if (bulk) bulkMails.check(s)
      // An API send's From header is the caller's word, so every author in it is checked too; an
      // SMTP client's header is its own business, as with any submission server: only its envelope is checked.
      const rules = await store.rules.list([s.order.id])
      const authors = s.interface === 'api' ? (s.authors ?? (s.headerFrom ? [s.headerFrom] : [])) : []
      await relay.checkSender(s.order, s.envFrom, authors, rules)
      for (const rcpt of s.recipients)
        await relay.checkRecipient(
          s.order,
          rcpt,
          s.recipientFields ? { ...s, field: s.recipientFields.get(rcpt.toLowerCase()) } : s,
          rules,
        )
      // Last of the checks: it counts the message once it passes.
      await refusing(s.order, { ...s, recipient: null }, () =>
        filter.checkSubject(
          { accountId: s.order.accountId, envFrom: s.envFrom, subject: s.subject, messageId: s.messageId },
          s.recipients,
        ),
      )
      // The policy's counters, then whether a person decides: only for a send that passed every check.
      const { policy } = s
      let reason: string | null = null
      if (policy) {
        await refusing(s.order, { ...s, recipient: null }, () => takeSend(store, policy, clock()))
        reason = await approvalReason(store, s.order.accountId, policy, s.recipients)
      }
      const txid = s.txid ?? relay.newTxid()
      const front = [
        ...(s.received
          ? [
              receivedHeader({
                ...s.received,
                by: config.nodeName,
                protocol: s.transtype,
                id: txid,
                date: new Date(clock()),
              }),
            ]
          : []),
        ...(s.added ? [Buffer.from(s.added)] : []),
        ...(bulk ? [bulkMails.headers({ accountId: s.order.accountId, txid, address: s.recipients[0] })] : []),
      ]
      // Signed last, over the message as it will be delivered; the signature goes on top.
      const raw = await signMessage(
        { store, logger },
        {
          accountId: s.order.accountId,
          from: s.headerFrom,
          raw: front.length ? [...front, ...s.raw] : s.raw,
          time: clock(),
          txid,
        },
      )
      const sandbox = s.sandbox === true || s.order.sandbox
      const message: NewMessage = {
        txid,
        accountId: s.order.accountId,
        orderId: s.order.id,
        envFrom: s.envFrom,
        recipients: s.recipients,
        headerFrom: s.headerFrom,
        replyTo: s.replyTo,
        subject: s.subject,
        messageId: s.messageId,
        origin: s.origin,
        transtype: s.transtype,
        interface: s.interface,
        sendingZone: 'default',
        raw,
        time: clock(),
        ...(sandbox ? { sandbox } : {}),
      }
      // A held message is stored in the store itself, never through the intake (the engine's
      // queue): its rows are never due, and nothing claims them before a decision.
      let hold: Hold | null = null
      if (policy && reason !== null) {
        const expiresAt = clock() + config.approval.ttl
        const approvalUrl = approvalUrlOf(config.publicUrl, txid)
        hold = await store.holds.create(message, {
          holder: holderKey(policy.holder),
          holderLabel: holderLabel(policy.holder),
          reason,
          expiresAt,
          approvalUrl,
          response: `held for a person's approval (${reason}) until ${new Date(expiresAt).toISOString()}: ${approvalUrl}`,
        })
      } else await intake.enqueue(message)
      if (s.inReplyTo && s.messageId) await joinThread(s.order.accountId, txid, s.messageId, s.inReplyTo)
      logger.info(
        {
          txid,
          order: s.order.id,
          rcpts: s.recipients.length,
          size,
          via: s.interface,
          ...(sandbox ? { sandbox } : {}),
          ...(hold ? { reason } : {}),
        },
        hold ? 'message held' : 'message queued',
      )
      return { txid, hold }
    },
  }
  if (!metrics) return relay
  return {
    ...relay,
    // What the pipeline accepted and refused, counted by the door it came in by.
    submit: (s) =>
      relay.submit(s).then(
        (submitted) => {
          metrics.accepted(doorOf(s))
          return submitted
        },
        (err: unknown) => {
          if (err instanceof Refusal) metrics.refused(doorOf(s), err.reason)
          throw err
        },
      ),
  }
}

const doorOf = (s: Pick<Submission, 'interface'>) => (s.interface === 'feeder' ? 'smtp' : 'api')
