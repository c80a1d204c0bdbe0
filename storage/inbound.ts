import { randomBytes } from 'node:crypto'
import { badInput } from '../errors.js'
import { byteLength, newEventId, type WebhookEvent } from './store.js'

/**
 * Received mail (issue #37): receiving domains, inboxes, inbound messages and threads. The MX
 * door (relay/inbound/) parses and verifies a message and hands it to `Store['inbound']`; the
 * types it hands over are structural contracts between the two halves, kept here because storage
 * imports nothing from the relay.
 */

/** One address of a header, as mailparser gives it. */
export interface InboundAddress {
  address: string
  name: string
}

/** What is parsed once at intake (relay/inbound/parse.ts). */
export interface ParsedInbound {
  /** The Message-ID header, without < >. */
  messageId: string | null
  /** Without < >. */
  inReplyTo: string | null
  /** Without < >, oldest first. */
  references: string[]
  from: InboundAddress | null
  replyTo: InboundAddress[]
  to: InboundAddress[]
  cc: InboundAddress[]
  subject: string | null
  /** Ms since epoch, from the Date header. */
  date: number | null
  text: string | null
  /** As received: sanitized only where shown. */
  html: string | null
  /** The new part of a reply (email-reply-parser). */
  extractedText: string | null
  attachments: InboundAttachment[]
  /** Why the message is automatic (RFC 3834 Auto-Submitted, Precedence bulk|list|junk, a null or MAILER-DAEMON sender), or null. */
  automatic: string | null
}

export interface InboundAttachment {
  index: number
  filename: string | null
  contentType: string
  size: number
}

/** The authentication verdict (relay/inbound/verify.ts). Results are RFC 8601 words: pass, fail, softfail, neutral, none, temperror, permerror. */
export interface AuthVerdict {
  spf: { result: string; domain: string | null }
  dkim: { result: string; domain: string | null; selector: string | null }[]
  dmarc: { result: string; policy: string | null; domain: string | null }
  arc: { result: string }
  /** Set for mail delivered from an account of this mailroom without leaving it: who submitted it (nothing else was checked). */
  local?: string
  /** The Authentication-Results header's value, as prepended to the stored message. */
  header: string
}

/** What the door hands the store: one message, accepted for one or more addresses of one account. */
export interface NewInboundMessage {
  accountId: number
  /** Lower-cased envelope recipients of this account (each an inbox, or an address at a catch-all domain). */
  recipients: string[]
  /** Envelope sender, '' for the null sender. */
  mailFrom: string
  remoteAddress: string
  /** Ms. */
  receivedAt: number
  /**
   * The whole message as stored, in pieces stored one after the other: this MX's
   * Authentication-Results first, then the message's bytes as received (withAuthResults), so
   * that a large message is not copied to put the header on top.
   */
  raw: Buffer[]
  parsed: ParsedInbound
  auth: AuthVerdict
}

/** What the door asks at RCPT, for one address. */
export type InboundRecipient =
  /** An inbox, or any address at a catch-all domain. */
  | { kind: 'inbox'; accountId: number }
  /** An inbox whose stored bytes reached MAILROOM_INBOX_QUOTA. */
  | { kind: 'full'; accountId: number }
  /** A receiving domain, no such inbox, not catch-all. */
  | { kind: 'unknown' }
  /** No account receives for that domain. */
  | { kind: 'not-receiving' }

/** A domain of the account that takes mail. */
export interface ReceivingDomain {
  domain: string
  accountId: number
  /** Every address at it is an inbox (made at the first message). */
  catchAll: boolean
  createdAt: number
}

/** An address at a receiving domain that keeps what it receives. */
export interface Inbox {
  id: number
  accountId: number
  address: string
  createdAt: number
  /** Bytes of the messages it holds (what MAILROOM_INBOX_QUOTA caps). */
  storedBytes: number
  /** How many messages it holds, and how many of them are unread. */
  messages: number
  unread: number
}

/** A received message as lists show it. */
export interface InboundSummary {
  id: string
  inboxId: number
  /** The inbox's address (the envelope recipient it was received for). */
  inbox: string
  threadId: string
  messageId: string | null
  from: InboundAddress | null
  to: InboundAddress[]
  cc: InboundAddress[]
  subject: string | null
  /** The Date header (ms), when it had one. */
  date: number | null
  receivedAt: number
  /** The stored message's bytes. */
  size: number
  attachmentCount: number
  /** Why it is automatic (an auto-reply, a list, a bounce), or null. */
  automatic: string | null
  read: boolean
  /** The authentication verdict, without the header: null for a message stored before summaries had it. */
  auth: SummaryVerdict | null
  /** The new part of a reply (email-reply-parser): what an agent reads first. */
  extractedText: string | null
}

/** AuthVerdict without its header, as a summary gives it. */
export type SummaryVerdict = Omit<AuthVerdict, 'header'>

/** A verdict without its header. */
export const withoutHeader = ({ header: _, ...verdict }: SummaryVerdict & { header?: string }): SummaryVerdict =>
  verdict

/** A received message whole but for its bytes (getInboundMessage). */
export interface InboundMessage extends InboundSummary {
  mailFrom: string
  remoteAddress: string
  replyTo: InboundAddress[]
  inReplyTo: string | null
  references: string[]
  text: string | null
  html: string | null
  attachments: InboundAttachment[]
  auth: AuthVerdict
}

/** One message of a thread, of either direction. */
export type ThreadEntry =
  | { direction: 'received'; time: number; message: InboundSummary }
  | {
      direction: 'sent'
      time: number
      message: {
        txid: string
        from: string
        to: string[]
        subject: string | null
        messageId: string | null
      }
    }

export interface InboundQuery {
  accountId: number
  /** An inbox by id, or by address. */
  inboxId?: number
  inbox?: string
  /** The From address (any case). */
  from?: string
  threadId?: string
  /** Received at or after (ms). */
  since?: number
  /** Received before (ms). */
  until?: number
  unread?: boolean
  skip: number
  limit: number
}

export interface InboundStore {
  /**
   * Marks a domain the account has (`domains.addKey`) as receiving, or not (`receiving: false`;
   * its inboxes and their messages are kept). Undefined when the account has no such domain.
   */
  setReceiving(input: {
    accountId: number
    domain: string
    receiving: boolean
    catchAll: boolean
    now: number
  }): Promise<{ domain: string; receiving: boolean; catchAll: boolean } | undefined>
  /** The account's receiving domains, by name. */
  receivingDomains(accountId: number): Promise<ReceivingDomain[]>
  /**
   * Adds an inbox; throws a MailroomError (400) and adds nothing when its
   * domain is not a receiving domain of the account or the address is an inbox already.
   */
  addInbox(input: { accountId: number; address: string; now: number }): Promise<Inbox>
  /** The account's inboxes, by address. */
  inboxes(accountId: number): Promise<Inbox[]>
  /** Deletes an inbox of the account and the messages it holds; false when it has none by that id. */
  deleteInbox(id: number, accountId: number): Promise<boolean>
  /**
   * Who takes mail for an address (asked at RCPT), `full` once its inbox holds `quota` bytes.
   * `postmaster@` a receiving domain is always an inbox, made by its first message as at a
   * catch-all domain (takesAll).
   */
  recipient(address: string, quota: number): Promise<InboundRecipient>
  /**
   * Stores a message for each of its recipients, in one transaction: at a catch-all domain (and
   * for postmaster) the inbox is made; each joins its thread, and a message.received event is written per recipient.
   */
  receive(message: NewInboundMessage): Promise<{ id: string; inboxId: number; threadId: string }[]>
  /** A page of the account's received messages, newest first, and how many match. */
  list(query: InboundQuery): Promise<{ total: number; rows: InboundSummary[] }>
  get(id: string, accountId: number): Promise<InboundMessage | undefined>
  /** The message's bytes as stored; undefined when the account has none by that id. */
  raw(id: string, accountId: number): Promise<Buffer | undefined>
  /** Marks messages of the account read (or unread); returns how many it changed. */
  markRead(ids: string[], accountId: number, read: boolean): Promise<number>
  /** The thread's messages of both directions, oldest first; undefined when the account has no such thread. */
  thread(threadId: string, accountId: number): Promise<ThreadEntry[] | undefined>
  /** Puts a sent message (by its Message-ID, with or without < >) in a thread; false when the account sent none by that id. */
  linkSent(input: { accountId: number; messageId: string; threadId: string }): Promise<boolean>
  /**
   * Puts a sent message (by its Message-ID) in the thread of the message it answers (`inReplyTo`,
   * one the account received or sent; a sent one without a thread gets one). The thread's id, or
   * undefined when the account has no message by either id.
   */
  linkReply(input: { accountId: number; messageId: string; inReplyTo: string }): Promise<string | undefined>
  /** Deletes the messages received before `before`, and their bytes; returns how many. */
  expireInbound(before: number): Promise<number>
}

/** The refusals of addInbox: invalid input (400), with what is wrong. */
export const notReceiving = (domain: string) => badInput(`${domain} is not a receiving domain of this account`)
export const inboxExists = (address: string) => badInput(`${address} is an inbox already`)

export const newInboundId = () => `in_${randomBytes(12).toString('hex')}`
export const newThreadId = () => `th_${randomBytes(12).toString('hex')}`

/** A Message-ID as both directions keep it for matching: without < >. */
export const bareMessageId = (id: string) => id.trim().replace(/^<|>$/g, '')

/** The Message-IDs a received message answers, the one it most directly answers first. */
export function answered(parsed: Pick<ParsedInbound, 'inReplyTo' | 'references'>): string[] {
  const ids = [parsed.inReplyTo, ...[...parsed.references].reverse()].filter((id): id is string => !!id)
  return [...new Set(ids.map(bareMessageId))]
}

/** The JSON kept with a received message beside its columns: what lists and the message show. */
export interface InboundMeta {
  to: InboundAddress[]
  cc: InboundAddress[]
  replyTo: InboundAddress[]
  date: number | null
  references: string[]
  attachments: InboundAttachment[]
  automatic: string | null
  /** The verdict without its header, for summaries (rows stored before it had one: absent). */
  auth?: SummaryVerdict
}

export const metaOf = (p: ParsedInbound, auth: AuthVerdict): InboundMeta => ({
  auth: withoutHeader(auth),
  to: p.to,
  cc: p.cc,
  replyTo: p.replyTo,
  date: p.date,
  references: p.references,
  attachments: p.attachments,
  automatic: p.automatic,
})

/** A row of either backend, its columns named as here, as the Store answers it. */
export interface InboundRow {
  id: string
  inboxId: number
  inbox: string
  threadId: string
  messageId: string | null
  fromAddress: string | null
  fromName: string | null
  subject: string | null
  receivedAt: number
  size: number
  read: boolean | number
  meta: string
  extractedText: string | null
}

/** A row as its summary; `meta` is the row's, parsed (toMessage parses it once for both). */
export function toSummary(row: InboundRow, meta = JSON.parse(row.meta) as InboundMeta): InboundSummary {
  return {
    id: row.id,
    inboxId: row.inboxId,
    inbox: row.inbox,
    threadId: row.threadId,
    messageId: row.messageId,
    from: row.fromAddress === null ? null : { address: row.fromAddress, name: row.fromName ?? '' },
    to: meta.to,
    cc: meta.cc,
    subject: row.subject,
    date: meta.date,
    receivedAt: row.receivedAt,
    size: row.size,
    attachmentCount: meta.attachments.length,
    automatic: meta.automatic,
    read: row.read === true || row.read === 1,
    auth: meta.auth ?? null,
    extractedText: row.extractedText,
  }
}

/** The detail columns of a row, beside the summary's. */
export interface InboundDetailRow extends InboundRow {
  mailFrom: string
  remoteAddress: string
  inReplyTo: string | null
  text: string | null
  html: string | null
  auth: string
}

export function toMessage(row: InboundDetailRow): InboundMessage {
  const meta = JSON.parse(row.meta) as InboundMeta
  return {
    ...toSummary(row, meta),
    mailFrom: row.mailFrom,
    remoteAddress: row.remoteAddress,
    replyTo: meta.replyTo,
    inReplyTo: row.inReplyTo,
    references: meta.references,
    text: row.text,
    html: row.html,
    attachments: meta.attachments,
    auth: JSON.parse(row.auth) as AuthVerdict,
  }
}

/** The message.received event of a message stored for one inbox. */
export function receivedEvent(m: NewInboundMessage, summary: InboundSummary): WebhookEvent {
  return {
    id: newEventId(),
    type: 'message.received',
    accountId: m.accountId,
    time: m.receivedAt,
    data: summary,
  }
}

/** The summary of a message about to be stored, for its event (nothing read back). */
export function newSummary(
  m: NewInboundMessage,
  row: { id: string; inboxId: number; inbox: string; threadId: string },
): InboundSummary {
  const p = m.parsed
  return {
    ...row,
    messageId: p.messageId,
    from: p.from,
    to: p.to,
    cc: p.cc,
    subject: p.subject,
    date: p.date,
    receivedAt: m.receivedAt,
    size: byteLength(m.raw),
    attachmentCount: p.attachments.length,
    automatic: p.automatic,
    read: false,
    auth: withoutHeader(m.auth),
    extractedText: p.extractedText,
  }
}

/**
 * Whether a receiving domain takes mail for an address that is no inbox, making its inbox: every
 * address at a catch-all domain, and postmaster at any (RFC 5321 §4.5.1: a domain that takes mail
 * must take it for postmaster, whose local part is case-insensitive; the address is lower-cased).
 */
export function takesAll(address: string, catchAll: boolean): boolean {
  return catchAll || address.slice(0, address.lastIndexOf('@')) === 'postmaster'
}

/** The lower-cased address and its domain. */
export function splitAddress(address: string): { address: string; domain: string } {
  const lower = address.trim().toLowerCase()
  return { address: lower, domain: lower.slice(lower.lastIndexOf('@') + 1) }
}
