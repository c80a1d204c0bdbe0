import type { Hold } from '../../storage/store.js'
import type { Services } from '../../tools/define.js'

/**
 * A message held for approval, stored as the pipeline stores one (store.holds.create): of `orderId`
 * (its account `accountId`), to `to`, expiring MAILROOM_APPROVAL_TTL after now.
 */
export async function holdMessage(
  services: Pick<Services, 'store' | 'relay' | 'config' | 'clock'>,
  { accountId, orderId }: { accountId: number; orderId: number },
  options: { to?: string[]; subject?: string; text?: string; sandbox?: boolean; holder?: string } = {},
): Promise<Hold> {
  const txid = services.relay.newTxid()
  const to = options.to ?? ['bob@example.com']
  const subject = options.subject ?? 'For your approval'
  const raw = Buffer.from(
    [
      'From: agent@example.org',
      `To: ${to.join(', ')}`,
      `Subject: ${subject}`,
      `Message-ID: <${txid}@example.org>`,
      'Content-Type: text/plain; charset=utf-8',
      '',
      options.text ?? 'Hello Bob,\r\nthe agent wrote this.',
      '',
    ].join('\r\n'),
  )
  const now = services.clock()
  const holder = options.holder ?? 'key:1'
  return services.store.holds.create(
    {
      txid,
      accountId,
      orderId,
      envFrom: 'agent@example.org',
      recipients: to,
      headerFrom: 'agent@example.org',
      replyTo: null,
      subject,
      messageId: `<${txid}@example.org>`,
      origin: '192.0.2.10',
      transtype: 'HTTP',
      interface: 'api',
      sendingZone: 'default',
      raw: [raw],
      time: now,
      sandbox: options.sandbox,
    },
    {
      holder,
      holderLabel: holder === 'key:1' ? 'API key 1' : holder,
      reason: 'every send of API key 1 waits for approval',
      expiresAt: now + services.config.approval.ttl,
      approvalUrl: `${services.config.publicUrl}/console/approvals?id=${txid}`,
      response: 'held for approval: every send of API key 1 waits for approval',
    },
  )
}
