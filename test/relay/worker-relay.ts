import type { DeliveryWorker } from '../../relay/delivery.js'
import { createRelay, storeIntake } from '../../relay/pipeline.js'
import type { TestEnv } from '../helpers.js'

/**
 * A relay whose accepted messages go to `worker`, as in `mailroom serve`'s engine, and a send of a
 * small message from sender@example.org through it, by the env's order; resolves with its txid.
 */
export function relayTo(env: TestEnv, worker: DeliveryWorker, subject = 'delivery test') {
  const relay = createRelay({
    ...env.services,
    intake: { ...storeIntake(env.services.store), enqueue: (message) => worker.accept(message) },
  })
  const send = (to: string[], extra: Record<string, unknown> = {}) =>
    relay
      .submit({
        order: {
          id: env.orderId,
          accountId: env.accountId,
          status: 'active',
          comment: null,
          senders: [],
          createdAt: 0,
        },
        envFrom: 'sender@example.org',
        recipients: to,
        headerFrom: 'sender@example.org',
        replyTo: null,
        subject,
        messageId: '<t@example.org>',
        raw: [Buffer.from(`From: sender@example.org\r\nTo: ${to.join(', ')}\r\nSubject: ${subject}\r\n\r\nhello\r\n`)],
        origin: '127.0.0.1',
        transtype: 'HTTP',
        interface: 'api',
        ...extra,
      })
      .then((submitted) => submitted.txid)
  return { relay, send }
}
