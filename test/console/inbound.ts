import type { Runtime } from '../../runtime.js'
import type { AuthVerdict, ParsedInbound } from '../../storage/inbound.js'

/** Every check passed, for remote.example. */
export const PASS: AuthVerdict = {
  spf: { result: 'pass', domain: 'remote.example' },
  dkim: [{ result: 'pass', domain: 'remote.example', selector: 's1' }],
  dmarc: { result: 'pass', policy: 'reject', domain: 'remote.example' },
  arc: { result: 'none' },
  header: 'mx.in.example; spf=pass; dkim=pass; dmarc=pass',
}

/** A forgery of bank.example: every check failed. */
export const FORGED: AuthVerdict = {
  spf: { result: 'fail', domain: 'bank.example' },
  dkim: [{ result: 'fail', domain: 'bank.example', selector: 's1' }],
  dmarc: { result: 'fail', policy: 'none', domain: 'bank.example' },
  arc: { result: 'none' },
  header: 'mx.in.example; spf=fail; dkim=fail; dmarc=fail',
}

/**
 * A message received now by `inbox` of account 1, stored as the MX door stores one (parsed and
 * verified: `parsed` and `auth` say what of), so that the console's tests need no MX door.
 */
export async function receive(admin: Runtime, inbox: string, parsed: Partial<ParsedInbound>, auth = PASS) {
  const [stored] = await admin.store.inbound.receive({
    accountId: 1,
    recipients: [inbox],
    mailFrom: parsed.from?.address ?? '',
    remoteAddress: '192.0.2.7',
    receivedAt: Date.now(),
    raw: [Buffer.from(`Authentication-Results: ${auth.header}\r\nSubject: ${parsed.subject}\r\n\r\nHi\r\n`)],
    parsed: {
      messageId: `m${Math.random().toString(36).slice(2)}@remote.example`,
      inReplyTo: null,
      references: [],
      from: null,
      replyTo: [],
      to: [{ address: inbox, name: '' }],
      cc: [],
      subject: null,
      date: Date.now() - 1000,
      text: null,
      html: null,
      extractedText: null,
      attachments: [],
      automatic: null,
      ...parsed,
    },
    auth,
  })
  return stored
}

/** Makes `domain` (a domain of account 1 already) receive mail, with the inbox `local`@domain. */
export async function receiving(admin: Runtime, domain: string, local?: string) {
  await admin.store.inbound.setReceiving({ accountId: 1, domain, receiving: true, catchAll: false, now: Date.now() })
  if (local) await admin.store.inbound.addInbox({ accountId: 1, address: `${local}@${domain}`, now: Date.now() })
}
