import libmime from 'libmime'
import { randomBytes } from 'node:crypto'
import MailComposer from 'nodemailer/lib/mail-composer'
import { badInput } from '../errors.js'
import { parseAddressString, uniqueAddresses, type Mailbox } from './addresses.js'

/** A body "contains HTML" when it has at least one tag, e.g. `<p>`, `<br/>` or `</div>`. */
const HTML_TAG = /<\/?[a-z][a-z0-9-]*(?:\s[^<>]*)?\/?>/i

export const isHtml = (body: string) => HTML_TAG.test(body)

export interface Composed {
  raw: Buffer
  messageId: string
  /** Envelope recipients: To, Cc and Bcc, without repeats. */
  recipients: string[]
}

export interface ComposeInput {
  from: Mailbox
  to: Mailbox[]
  cc?: Mailbox[]
  bcc?: Mailbox[]
  replyTo?: Mailbox[]
  subject: string
  body: string
  attachments?: { filename?: string; data: string }[]
  /** Used to make the Message-ID. */
  txid: string
  date: Date
}

/**
 * Builds the MIME message of an API send with nodemailer's composer. A Bcc header is never
 * written; Bcc recipients are only in the envelope.
 */
export async function composeMessage(input: ComposeInput): Promise<Composed> {
  const domain = input.from.address.slice(input.from.address.lastIndexOf('@') + 1).toLowerCase()
  const messageId = `<${input.txid}.${randomBytes(6).toString('hex')}@${domain}>`
  const html = isHtml(input.body)
  const composer = new MailComposer({
    from: input.from,
    to: input.to,
    cc: input.cc?.length ? input.cc : undefined,
    replyTo: input.replyTo?.length ? input.replyTo : undefined,
    subject: input.subject,
    messageId,
    date: input.date,
    ...(html ? { html: input.body, text: htmlToText(input.body) } : { text: input.body }),
    attachments: input.attachments?.map((a) => ({ filename: a.filename || 'attachment', content: a.data, encoding: 'base64' })),
    // Nothing in a request may make the composer read a file or fetch a URL.
    disableFileAccess: true,
    disableUrlAccess: true,
    xMailer: false,
  })
  const raw = await composer.compile().build()
  const recipients = uniqueAddresses([...input.to, ...(input.cc ?? []), ...(input.bcc ?? [])].map((m) => m.address))
  return { raw, messageId, recipients }
}

/** The plain-text alternative of an HTML body: tags dropped, block ends as line breaks. */
export function htmlToText(html: string): string {
  return html
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, '')
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<\/(p|div|h[1-6]|li|tr|table|blockquote)>/gi, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\n{3,}/g, '\n\n')
    .trim()
}

export interface RawHeaders {
  from: string | null
  recipients: string[]
  subject: string | null
  messageId: string | null
  replyTo: string | null
}

/**
 * Reads what the relay needs from a message's header block (the body is not parsed): the From
 * address, the recipients of To, Cc and Bcc, Subject (RFC 2047 words decoded), Message-ID and
 * Reply-To. RFC 5322 §2.2.3: folded header lines are unfolded first.
 */
export function readHeaders(raw: Buffer): RawHeaders {
  const block = raw.subarray(0, headerEnd(raw)).toString('utf8')
  const headers = new Map<string, string[]>()
  let name = ''
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && name) {
      const values = headers.get(name)!
      values[values.length - 1] += ' ' + line.trim()
    } else {
      const colon = line.indexOf(':')
      if (colon <= 0) continue
      name = line.slice(0, colon).trim().toLowerCase()
      headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()])
    }
  }
  const addresses = (field: string) => (headers.get(field) ?? []).flatMap((v) => parseAddressString(v).map((m) => m.address)).filter(Boolean)
  const first = (field: string) => headers.get(field)?.[0]
  const subject = first('subject')
  return {
    from: addresses('from')[0] ?? null,
    recipients: uniqueAddresses([...addresses('to'), ...addresses('cc'), ...addresses('bcc')]),
    subject: subject === undefined ? null : libmime.decodeWords(subject),
    messageId: first('message-id') ?? null,
    replyTo: addresses('reply-to')[0] ?? null,
  }
}

/** Offset just past the blank line that ends the header block (or the whole message when none). */
function headerEnd(raw: Buffer): number {
  const crlf = raw.indexOf('\r\n\r\n')
  const lf = raw.indexOf('\n\n')
  const ends = [crlf >= 0 ? crlf + 4 : -1, lf >= 0 ? lf + 2 : -1].filter((n) => n >= 0)
  if (ends.length === 0) {
    if (raw.length === 0) throw badInput('raw_email: the message is empty')
    return raw.length
  }
  return Math.min(...ends)
}
