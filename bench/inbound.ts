import { randomBytes } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { addDomainKey } from '../cli/domains.js'
import { openDataDir } from '../storage/sqlite/index.js'

// What #10 (the MX door against Postfix as an MX) needs besides the runner's own helpers: the
// receiving side's names, the messages, and what each side has received.

/** The domain both MX hosts receive for, and its one mailbox. */
export const RECEIVING_DOMAIN = 'inbox.test'
export const MAILBOX = { local: 'sink', address: `sink@${RECEIVING_DOMAIN}` }
/**
 * The envelope sender: at sender.test, whose DNS (test/relay/inbound-support.ts) publishes the
 * signing key, an SPF record that allows 127.0.0.1, and DMARC `p=reject`.
 */
export const SENDER = 'load@sender.test'

const head = (subject: string, extra: string[] = []) => [
  `From: Load <${SENDER}>`,
  `To: ${MAILBOX.address}`,
  `Subject: ${subject}`,
  'Message-ID: <load@sender.test>',
  'Date: Mon, 02 Nov 2026 10:00:00 +0000',
  'MIME-Version: 1.0',
  ...extra,
]

/**
 * A plain-text message that is `size` bytes once `sign` (a DKIM signer) has put its signature on
 * top; lines end in CRLF.
 */
export async function loadMessage(size: number, sign: (message: string) => Promise<string>): Promise<string> {
  const line = `${'x'.repeat(76)}\r\n`
  const unsigned = (lines: number) =>
    [...head('inbound load', ['Content-Type: text/plain; charset=us-ascii']), '', line.repeat(lines)].join('\r\n')
  // The signature's length depends on the key only, not on the body: measured once.
  const signatureLength = (await sign(unsigned(0))).length - unsigned(0).length
  const lines = Math.max(0, Math.floor((size - signatureLength - unsigned(0).length) / line.length))
  return sign(unsigned(lines))
}

/**
 * A message of about `size` bytes as a person sends a large one: a line of text and a file
 * attached (random bytes, base64 in lines of 76), signed by `sign`.
 */
export async function largeMessage(size: number, sign: (message: string) => Promise<string>): Promise<string> {
  const boundary = 'bench-boundary'
  const encodedLines = Math.floor((size - 1024) / 78)
  const file = randomBytes(encodedLines * 57)
    .toString('base64')
    .replace(/.{76}/g, '$&\r\n')
  const message = [
    ...head('the big file', [`Content-Type: multipart/mixed; boundary="${boundary}"`]),
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'The file is attached.',
    `--${boundary}`,
    'Content-Type: application/octet-stream; name="big.bin"',
    'Content-Disposition: attachment; filename="big.bin"',
    'Content-Transfer-Encoding: base64',
    '',
    file,
    `--${boundary}--`,
    '',
  ].join('\r\n')
  return sign(message)
}

/**
 * Makes RECEIVING_DOMAIN a receiving domain of account 1 in a data directory (as `mailroom
 * domain add` and `mailroom domain receive` do) with MAILBOX as its inbox. Its server must be
 * stopped: a running server may hold what it looked up.
 */
export async function addMailbox(dir: string): Promise<void> {
  const store = openDataDir(dir)
  try {
    const now = Date.now()
    await addDomainKey(
      { store, config: { nodeName: 'bench.example' }, clock: () => now },
      { accountId: 1, domain: RECEIVING_DOMAIN, algorithm: 'rsa' },
    )
    await store.inbound.setReceiving({ accountId: 1, domain: RECEIVING_DOMAIN, receiving: true, catchAll: false, now })
    await store.inbound.addInbox({ accountId: 1, address: MAILBOX.address, now })
  } finally {
    await store.close()
  }
}

/**
 * What the mailbox in the data directory holds: how many messages, and the verdict of the
 * newest (SPF and DKIM must both have run and passed for the figure to count).
 */
export async function mailboxOf(dir: string): Promise<{ count: number; spf?: string; dkim?: string }> {
  const store = openDataDir(dir)
  try {
    const { total, rows } = await store.inbound.list({ accountId: 1, inbox: MAILBOX.address, skip: 0, limit: 1 })
    const newest = rows[0] && (await store.inbound.get(rows[0].id, 1))
    return { count: total, spf: newest?.auth.spf.result, dkim: newest?.auth.dkim[0]?.result }
  } finally {
    await store.close()
  }
}

/** How many messages Postfix's virtual(8) has delivered into the mailbox's Maildir under `dir`. */
export function maildirCount(dir: string): number {
  try {
    return readdirSync(join(dir, 'mail', RECEIVING_DOMAIN, MAILBOX.local, 'new')).length
  } catch {
    return 0 // not made yet: nothing delivered
  }
}
