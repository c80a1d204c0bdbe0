import { z } from 'zod'
import type { InboundSummary, Inbox, SummaryVerdict } from '../storage/store.js'

/** The schemas the inbound tools share, and their rendering of the store's records. */

export const InboundAddress = z.object({ address: z.string(), name: z.string() })

export const InboxRecord = z.object({
  id: z.number().int(),
  address: z.string(),
  created: z.string().describe('ISO 8601, UTC.'),
  messages: z.number().int(),
  unread: z.number().int(),
  storedBytes: z.number().int(),
})

export const inboxRecord = (i: Inbox): z.input<typeof InboxRecord> => ({
  id: i.id,
  address: i.address,
  created: new Date(i.createdAt).toISOString(),
  messages: i.messages,
  unread: i.unread,
  storedBytes: i.storedBytes,
})

const Result = z.object({ result: z.string() })

/** The authentication verdict: SPF, each DKIM signature, DMARC, ARC, in RFC 8601's words. */
export const AuthRecord = z.object({
  spf: Result.extend({ domain: z.string().nullable() }),
  dkim: z.array(Result.extend({ domain: z.string().nullable(), selector: z.string().nullable() })),
  dmarc: Result.extend({ policy: z.string().nullable(), domain: z.string().nullable() }),
  arc: Result,
  local: z.string().optional().describe('Mail from an account of this mailroom, delivered inside it: who sent it.'),
})

export const InboundSummaryRecord = z.object({
  id: z.string(),
  inboxId: z.number().int(),
  inbox: z.string(),
  threadId: z.string(),
  messageId: z.string().nullable(),
  from: InboundAddress.nullable(),
  to: z.array(InboundAddress),
  cc: z.array(InboundAddress),
  subject: z.string().nullable(),
  date: z.string().nullable().describe('The Date header, ISO 8601.'),
  received: z.string().describe('ISO 8601, UTC.'),
  size: z.number().int(),
  attachmentCount: z.number().int(),
  automatic: z.string().nullable().describe('Why it is automatic (auto-reply, list, bounce), or null.'),
  read: z.boolean(),
  auth: AuthRecord.nullable(),
  extractedText: z.string().nullable().describe('The new part of a reply, without quoted history and signature.'),
})

/** A message's verdict has its header too: not part of the record. */
const withoutHeader = ({ header: _, ...verdict }: SummaryVerdict & { header?: string }): SummaryVerdict => verdict

export const summaryRecord = (m: InboundSummary): z.input<typeof InboundSummaryRecord> => ({
  id: m.id,
  inboxId: m.inboxId,
  inbox: m.inbox,
  threadId: m.threadId,
  messageId: m.messageId,
  from: m.from,
  to: m.to,
  cc: m.cc,
  subject: m.subject,
  date: m.date === null ? null : new Date(m.date).toISOString(),
  received: new Date(m.receivedAt).toISOString(),
  size: m.size,
  attachmentCount: m.attachmentCount,
  automatic: m.automatic,
  read: m.read,
  // A message's own verdict also has its header: not part of the record.
  auth: m.auth && withoutHeader(m.auth),
  extractedText: m.extractedText,
})

/** A received message's id, as tools take it. */
export const InboundId = z
  .string()
  .regex(/^in_[0-9a-f]{24}$/, 'expected a received message id such as in_…')
  .describe('A received message (listInboundMessages).')
