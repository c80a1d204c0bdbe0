import { randomBytes } from 'node:crypto'
import { openDataDir } from '../storage/sqlite.js'

/**
 * Fills a data directory's log with `rows` delivered recipients (one per message) in a single
 * transaction, spread over the filters' values so that each filter selects a realistic share:
 * 100 senders, 10,000 recipients, 50 client IPs, 100 subjects, 10 MX hosts, 1% undelivered,
 * times over the last 30 days. Returns values to query with.
 */
export function seedLog(dataDir: string, rows: number, orderId: number): Record<string, string> {
  const store = openDataDir(dataDir)
  const now = Date.now()
  const insertMessage = store.sqlite.prepare(`INSERT INTO messages (txid, account_id, order_id, env_from, header_from, reply_to, subject,
    message_id, origin, transtype, interface, sending_zone, body_size, rcpt_to, time, created_at)
    VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, 'HTTP', 'api', 'default', 4096, ?, ?, ?)`)
  const insertDelivery = store.sqlite.prepare(`INSERT INTO deliveries (message_id, seq, recipient, domain, state, delivered, code, response,
    mx_hostname, locked, attempts, next_attempt_at, queued) VALUES (?, 1, ?, ?, ?, ?, 250, '250 ok', ?, 0, 1, NULL, ?)`)
  const suffix = randomBytes(2).toString('hex')
  let middle = ''
  store.sqlite.transaction(() => {
    for (let i = 0; i < rows; i++) {
      const created = now - Math.floor(((rows - i) / rows) * 30 * 86_400_000)
      const from = `sender${i % 100}@bench.example`
      const to = `rcpt${i % 10_000}@dest${i % 10}.example`
      const txid = (BigInt(created) * 0x1000n + BigInt(i % 0x1000)).toString(16) + suffix
      if (i === Math.floor(rows / 2)) middle = txid
      const delivered = i % 100 === 0 ? 0 : 1
      const { lastInsertRowid } = insertMessage.run(txid, orderId, from, from, from, `subject ${i % 100}`, `<m${i}.${txid}@bench.example>`, `192.0.2.${i % 50}`, to, Math.floor(created / 1000), created)
      insertDelivery.run(lastInsertRowid, to, `dest${i % 10}.example`, delivered ? 'delivered' : 'failed', delivered, `mx${i % 10}.dest.example`, new Date(created).toISOString())
    }
  })()
  store.sqlite.pragma('optimize')
  void store.close()
  return { from: 'sender7@bench.example', to: 'rcpt1234@dest4.example', origin: '192.0.2.7', subject: 'subject 42', mailid: middle, messageId: `m${Math.floor(rows / 2)}.`, mx: 'mx3.dest.example' }
}
