import type { Hold } from './approval.js'
import { type NewMessage, newEventId, type Webhook, type WebhookEvent, type WebhookEventType } from './store.js'

/** The body posted for an event, as it is signed: `{"type", "timestamp", "data"}`. */
export function eventPayload(event: WebhookEvent): string {
  return JSON.stringify({ type: event.type, timestamp: new Date(event.time).toISOString(), data: event.data })
}

/** A `message.accepted` event per recipient of a message just queued (or approved, at its approval). */
export function acceptedEvents(
  m: Pick<NewMessage, 'txid' | 'accountId' | 'recipients' | 'envFrom' | 'subject' | 'messageId' | 'time'>,
): WebhookEvent[] {
  return m.recipients.map((recipient) => ({
    id: newEventId(),
    type: 'message.accepted',
    accountId: m.accountId,
    time: m.time,
    data: {
      transactionId: m.txid,
      recipient,
      from: m.envFrom,
      subject: m.subject,
      messageId: m.messageId,
      code: null,
      response: null,
      mxHost: null,
      attempt: 0,
    },
  }))
}

/** message.held, message.approved or message.rejected: one event for the whole message, at `time`. */
export function holdEvent(
  type: 'message.held' | 'message.approved' | 'message.rejected',
  hold: Hold,
  time: number,
): WebhookEvent {
  return {
    id: newEventId(),
    type,
    accountId: hold.accountId,
    time,
    data: {
      transactionId: hold.txid,
      from: hold.envFrom,
      recipients: hold.recipients,
      subject: hold.subject,
      messageId: hold.messageId,
      reason: hold.reason,
      holder: hold.holderLabel,
      approvalUrl: hold.approvalUrl,
      expiresAt: new Date(hold.expiresAt).toISOString(),
      decidedBy: hold.decidedBy,
    },
  }
}

/** The stored comma-separated list of event types, as a list. */
export const eventTypesOf = (stored: string) => stored.split(',').filter(Boolean) as WebhookEventType[]

/** A webhook row (either backend's column names mapped) as the Store answers it. */
export function toWebhook(row: {
  id: number
  accountId: number
  url: string
  events: string
  description: string | null
  createdAt: number
  failingSince: number | null
  lastError: string | null
  lastErrorAt: number | null
  disabledAt: number | null
}): Webhook {
  return { ...row, events: eventTypesOf(row.events) }
}
