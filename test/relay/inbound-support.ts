import type { DKIMSignOptions } from 'mailauth'
import { dkimSign } from 'mailauth/lib/dkim/sign.js'
import { generateDkimKey } from '../../relay/dkim.js'
import { startDnsmasq } from '../system/peers.js'

// What the tests of the MX door share: the DNS of sending domains, and their messages.

/** What a receiver's DNS answers: only the TXT records given, NXDOMAIN for every other name. */
export const resolverOf = (records: { name: string; value: string }[]) => async (name: string, type: string) => {
  const found = records.filter((r) => type === 'TXT' && r.name === name)
  if (!found.length) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' })
  // As DNS hands a long value over: strings of at most 255 characters.
  return found.map((r) => r.value.match(/.{1,255}/g) as string[])
}

/** A TXT record's text as dnsmasq's option takes it: strings of at most 255 characters (RFC 1035 §3.3.14), comma-separated. */
const txt = (name: string, text: string) => `--txt-record=${name},${text.match(/.{1,255}/g)!.join(',')}`

/** The DNS of a sending domain and a few others, served by a dnsmasq on loopback. */
export async function startSenderDns() {
  const key = generateDkimKey('rsa')
  const dns = await startDnsmasq([
    txt('s1._domainkey.sender.test', `v=DKIM1; k=rsa; p=${key.publicKey}`),
    txt('sender.test', 'v=spf1 ip4:127.0.0.1 -all'),
    txt('_dmarc.sender.test', 'v=DMARC1; p=reject'),
    txt('lenient.test', 'v=spf1 ip4:127.0.0.1 -all'),
    txt('_dmarc.lenient.test', 'v=DMARC1; p=none'),
  ])
  /** A message from `from`, signed by sender.test's key with mailauth's own signer. */
  const signed = async (message: string) => {
    const { signatures } = await dkimSign(message, {
      signatureData: [{ signingDomain: 'sender.test', selector: 's1', privateKey: key.privateKey }],
    } as DKIMSignOptions)
    return signatures + message
  }
  return { ...dns, signed }
}

export const senderMessage = (from = 'boss@sender.test', subject = 'the quote', body = 'Please send the quote.') =>
  [
    `From: Boss <${from}>`,
    'To: quotes@acme.test',
    `Subject: ${subject}`,
    'Message-ID: <q1@sender.test>',
    'Date: Mon, 02 Nov 2026 10:00:00 +0000',
    '',
    body,
    '',
  ].join('\r\n')
