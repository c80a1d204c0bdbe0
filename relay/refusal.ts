import { MailroomError } from '../errors.js'

/**
 * Why the relay refuses a message (or, over SMTP, one recipient at RCPT TO): the `reason` label of
 * mailroom_messages_refused_total, each with what it means for docs/operations.md.
 */
export const REFUSAL_REASONS = {
  order_canceled: 'the mail order is canceled',
  sender_not_authorized: "the sender is not one of the order's authorized senders",
  deny_rule: 'a deny rule matched the sender or a recipient',
  blocked_sender: 'the sender is on a block list (imported, or blocked by the spam filter)',
  suppressed_recipient: "the recipient is on the account's local block list",
  spam_trap: 'the recipient is a spam trap (the sender is blocked from then on)',
  spam_subject: 'a spam-indicative subject was repeated past its limit',
  too_large: 'the message is larger than MAILROOM_MAX_MESSAGE_SIZE',
  too_many_recipients: 'more recipients than MAILROOM_MAX_RECIPIENTS',
  no_recipients: 'the message has no recipients',
  recipient_not_allowed: "a recipient outside the send policy's allowedRecipients (docs/approval.md)",
  rate_limited: "the send policy's maxPerHour or maxPerDay is reached (docs/approval.md)",
  bulk_recipients: 'a bulk send (list) to more than one recipient: each gets an unsubscribe link of its own',
  list_header: 'a bulk send (list) whose message has a List-Unsubscribe field of its own',
} as const

export type RefusalReason = keyof typeof REFUSAL_REASONS

/** A refusal by the relay's checks: a MailroomError like any other, which says why for the metrics. */
export class Refusal extends MailroomError {
  constructor(
    readonly reason: RefusalReason,
    code: number,
    message: string,
    smtp?: { code: number; enhanced: string },
    headers?: Record<string, string>,
  ) {
    super(code, message, { smtp, headers })
  }
}

/** A 400 refusal (the SMTP reply given, or invalid input's). */
export const refusal = (reason: RefusalReason, message: string, smtp?: { code: number; enhanced: string }) =>
  new Refusal(reason, 400, message, smtp)

/**
 * Why the MX door refuses a connection, a recipient or a message: the `reason` label of
 * mailroom_mx_refused_total, each with what it means for docs/operations.md.
 */
export const MX_REFUSAL_REASONS = {
  too_many_connections: 'more connections open from the client than MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS',
  unoffered_parameter: 'a MAIL FROM parameter the door does not offer',
  invalid_address: 'a sender or recipient that is not an email address',
  relay_denied: 'a recipient at a domain no account receives for (the door is never an open relay)',
  no_such_mailbox: 'a recipient at a receiving domain that is no inbox',
  mailbox_full: "a recipient whose inbox's stored messages reached MAILROOM_INBOX_QUOTA",
  too_many_recipients: 'more recipients than MAILROOM_MAX_RECIPIENTS',
  harvest: 'as many refused recipients as MAILROOM_MAX_RECIPIENTS without a message accepted: the connection is closed',
  too_large: 'the message is larger than MAILROOM_MAX_MESSAGE_SIZE',
  busy: 'the memory budget could not hold the message then',
  data_timeout: 'the message did not arrive within MAILROOM_SMTP_DATA_TIMEOUT',
  dmarc_reject: "the message failed DMARC and its From domain's policy is p=reject",
  checks_failed: "the sender's DNS could not be checked in time",
  temporary_failure: 'the store did not answer (the recipient lookup or the commit failed)',
} as const

export type MxRefusalReason = keyof typeof MX_REFUSAL_REASONS
