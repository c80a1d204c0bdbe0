import { openDataDir } from '../storage/sqlite.js'

/**
 * Fills a data directory's log with `rows` delivered recipients (one per message), spread over
 * the filters' values: 100 senders, 100 recipients, 50 client IPs, 100 subjects, 10 MX hosts, 1%
 * undelivered, times over the last 30 days. Each value a query asks for (but a transaction id or
 * a Message-ID) then fills at least a page of 100 rows at 10,000 rows as at 1,000,000, so that #4
 * compares the same answer from a table a hundred times larger. One transaction; the secondary
 * indexes and the trigram index are built once at the end, which is much faster than keeping them
 * up to date row by row. Returns values to query with.
 */
export function seedLog(dataDir: string, rows: number, orderId: number): Record<string, string> {
  const store = openDataDir(dataDir)
  const db = store.sqlite
  // Helper threads sort the index entries: the index builds took 9 s instead of 13.
  db.pragma('threads = 4')
  const now = Date.now()
  const span = 30 * 86_400_000
  const schemaSql = (type: string) =>
    db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = ? AND tbl_name IN ('messages', 'deliveries') AND sql IS NOT NULL`).all(type) as { name: string; sql: string }[]
  const indexes = schemaSql('index')
  const triggers = schemaSql('trigger')
  db.transaction(() => {
    for (const { name } of [...indexes, ...triggers]) db.exec(`DROP ${indexes.some((i) => i.name === name) ? 'INDEX' : 'TRIGGER'} "${name}"`)
    const base = (db.prepare('SELECT COALESCE(MAX(id), 0) FROM messages').pluck().get() as number) + 1
    // The transaction id is hex(ms * 0x1000 + seq) plus a suffix, as the relay makes them.
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < @rows - 1)
       INSERT INTO messages (id, txid, account_id, order_id, env_from, header_from, reply_to, subject, message_id, origin, transtype,
         interface, sending_zone, body_size, rcpt_to, time, created_at)
       SELECT @base + i, printf('%014x%04x', CAST(@now - (@rows - i) * @span / @rows AS INTEGER) * 4096 + (i % 4096), i / 4096), 1, @order,
         'sender' || (i % 100) || '@bench.example', 'sender' || (i % 100) || '@bench.example', 'sender' || (i % 100) || '@bench.example',
         'subject ' || (i % 100), '<m' || i || '.bench@bench.example>', '192.0.2.' || (i % 50), 'HTTP', 'api', 'default', 4096,
         'rcpt' || (i % 100) || '@dest' || (i % 10) || '.example', CAST((@now - (@rows - i) * @span / @rows) / 1000 AS INTEGER),
         CAST(@now - (@rows - i) * @span / @rows AS INTEGER)
       FROM n`,
    ).run({ rows, base, now, span, order: orderId })
    db.prepare(
      `INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, code, response, mx_hostname, locked, attempts, queued)
       SELECT id, order_id, 1, rcpt_to, substr(rcpt_to, instr(rcpt_to, '@') + 1),
         CASE WHEN (id - @base) % 100 = 0 THEN 'failed' ELSE 'delivered' END, CASE WHEN (id - @base) % 100 = 0 THEN 0 ELSE 1 END,
         250, '250 ok', 'mx' || ((id - @base) % 10) || '.dest.example', 0, 1, strftime('%Y-%m-%dT%H:%M:%fZ', created_at / 1000.0, 'unixepoch')
       FROM messages WHERE id >= @base`,
    ).run({ base })
    for (const { sql } of [...indexes, ...triggers]) db.exec(sql)
    db.exec(`INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')`)
    db.prepare(
      `INSERT INTO order_counts (order_id, messages, deliveries) VALUES (?, ?, ?)
       ON CONFLICT (order_id) DO UPDATE SET messages = messages + excluded.messages, deliveries = deliveries + excluded.deliveries`,
    ).run(orderId, rows, rows)
  })()
  db.exec('ANALYZE')
  const middle = db.prepare('SELECT txid FROM messages WHERE order_id = ? ORDER BY id LIMIT 1 OFFSET ?').pluck().get(orderId, Math.floor(rows / 2)) as string
  void store.close()
  return { from: 'sender7@bench.example', to: 'rcpt34@dest4.example', origin: '192.0.2.7', subject: 'subject 42', mailid: middle, messageId: `m${Math.floor(rows / 2)}.`, mx: 'mx3.dest.example' }
}
