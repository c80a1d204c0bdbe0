import Database from 'better-sqlite3'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { openDataDir } from '../storage/sqlite.js'

/** The Message-ID of the seeded message numbered `i` (SQL over the recursive counter `n(i)`). */
const MESSAGE_ID = `'<m' || i || '.bench@bench.example>'`
/** The recursive counter 0 … @rows - 1 every insert below selects from. */
const COUNTER = 'WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < @rows - 1)'
/** The seeded messages' and deliveries' indexes whose keys grow with the row id. */
const APPENDED_INDEXES = ['messages_txid', 'messages_order', 'messages_order_time', 'deliveries_message_seq', 'deliveries_due']
/** FTS5's tables behind the Message-ID index (migration 0001). */
const FTS_TABLES = ['data', 'idx', 'docsize', 'config'].map((t) => `messages_fts_${t}`)

/**
 * Fills the empty log of a data directory with `rows` delivered recipients (one per message),
 * spread over the filters' values: 100 senders, 100 recipients, 50 client IPs, 100 subjects, 10 MX
 * hosts, 1% undelivered, times over the last 30 days. Each value a query asks for (but a
 * transaction id or a Message-ID) then fills at least a page of 100 rows at 10,000 rows as at
 * 1,000,000, so that #4 compares the same answer from a table a hundred times larger. One
 * transaction, without the WAL; the secondary indexes are built once at the end, which is much
 * faster than keeping them up to date row by row (but for those whose entries are appended). The Message-ID trigram index is built
 * meanwhile on the other core, in a thread and a file of its own, and copied in at the end.
 * Returns values to query with.
 */
export async function seedLog(dataDir: string, rows: number, orderId: number): Promise<Record<string, string>> {
  const store = openDataDir(dataDir)
  const db = store.sqlite
  if (db.prepare('SELECT 1 FROM messages LIMIT 1').get()) throw new Error('seedLog fills an empty log only')
  const ftsFile = join(dataDir, 'seed-fts.db')
  const ftsSql = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").pluck().get() as string
  const fts = buildMessageIdIndex(ftsFile, ftsSql, rows)
  // Helper threads sort the index entries: the index builds took 9 s instead of 13.
  db.pragma('threads = 4')
  // The data directory is the bench's own and no server has it open. The one large transaction
  // then goes straight into the database file, with a rollback journal that holds only the few
  // pages there were before, instead of into the WAL, which a checkpoint then copies into the
  // file again (3 s of the seed). Nothing is synced: the bench does not outlive its data.
  db.pragma('journal_mode = DELETE')
  db.pragma('synchronous = OFF')
  const now = Date.now()
  const span = 30 * 86_400_000
  const schemaSql = (type: string) =>
    db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = ? AND tbl_name IN ('messages', 'deliveries') AND sql IS NOT NULL`).all(type) as { name: string; sql: string }[]
  // Built at the end, but those whose keys follow the row ids here (the transaction id, the order
  // with or without the time, a delivery's message): kept up to date during the inserts, each
  // entry lands at the end of its index, which costs less than sorting them all afterwards (0.5 s).
  const indexes = schemaSql('index').filter((i) => !APPENDED_INDEXES.includes(i.name))
  const triggers = schemaSql('trigger')
  db.transaction(() => {
    for (const { name } of [...indexes, ...triggers]) db.exec(`DROP ${indexes.some((i) => i.name === name) ? 'INDEX' : 'TRIGGER'} "${name}"`)
    // Message i is row i + 1. The transaction id is hex(ms * 0x1000 + seq) plus a suffix, as the relay makes them.
    db.prepare(
      `${COUNTER}
       INSERT INTO messages (id, txid, account_id, order_id, env_from, header_from, reply_to, subject, message_id, origin, transtype,
         interface, sending_zone, body_size, rcpt_to, time, created_at)
       SELECT 1 + i, printf('%014x%04x', CAST(@now - (@rows - i) * @span / @rows AS INTEGER) * 4096 + (i % 4096), i / 4096), 1, @order,
         'sender' || (i % 100) || '@bench.example', 'sender' || (i % 100) || '@bench.example', 'sender' || (i % 100) || '@bench.example',
         'subject ' || (i % 100), ${MESSAGE_ID}, '192.0.2.' || (i % 50), 'HTTP', 'api', 'default', 4096,
         'rcpt' || (i % 100) || '@dest' || (i % 10) || '.example', CAST((@now - (@rows - i) * @span / @rows) / 1000 AS INTEGER),
         CAST(@now - (@rows - i) * @span / @rows AS INTEGER)
       FROM n`,
    ).run({ rows, now, span, order: orderId })
    db.prepare(
      `INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, code, response, mx_hostname, locked, attempts, queued)
       SELECT id, order_id, 1, rcpt_to, substr(rcpt_to, instr(rcpt_to, '@') + 1),
         CASE WHEN (id - 1) % 100 = 0 THEN 'failed' ELSE 'delivered' END, CASE WHEN (id - 1) % 100 = 0 THEN 0 ELSE 1 END,
         250, '250 ok', 'mx' || ((id - 1) % 10) || '.dest.example', 0, 1, strftime('%Y-%m-%dT%H:%M:%fZ', created_at / 1000.0, 'unixepoch')
       FROM messages`,
    ).run()
    for (const { sql } of [...indexes, ...triggers]) db.exec(sql)
    db.prepare(
      `INSERT INTO order_counts (order_id, messages, deliveries) VALUES (?, ?, ?)
       ON CONFLICT (order_id) DO UPDATE SET messages = messages + excluded.messages, deliveries = deliveries + excluded.deliveries`,
    ).run(orderId, rows, rows)
  })()
  await fts
  // The index's own tables are written directly, which SQLite allows only outside its defensive mode.
  db.unsafeMode(true)
  db.prepare('ATTACH ? AS seed').run(ftsFile)
  db.transaction(() => {
    for (const table of FTS_TABLES) db.exec(`DELETE FROM ${table}; INSERT INTO ${table} SELECT * FROM seed.${table}`)
  })()
  db.exec('DETACH seed')
  db.unsafeMode(false)
  rmSync(ftsFile)
  // Statistics from samples of each index: enough for the planner's choices, in 0.1 s instead of 2.
  db.pragma('analysis_limit = 1000')
  db.exec('ANALYZE')
  // Back to the data directory's own mode before the server opens it.
  db.pragma('journal_mode = WAL')
  const middle = db.prepare('SELECT txid FROM messages WHERE order_id = ? ORDER BY id LIMIT 1 OFFSET ?').pluck().get(orderId, Math.floor(rows / 2)) as string
  void store.close()
  return { from: 'sender7@bench.example', to: 'rcpt34@dest4.example', origin: '192.0.2.7', subject: 'subject 42', mailid: middle, messageId: `m${Math.floor(rows / 2)}.`, mx: 'mx3.dest.example' }
}

/**
 * Builds, in a thread of its own, the trigram index of the seeded Message-IDs into a database file
 * of its own, whose index table `sql` creates as the data directory's own schema does.
 */
function buildMessageIdIndex(file: string, sql: string, rows: number): Promise<void> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { seedMessageIdIndex: { file, sql, rows } } })
  return new Promise((resolve, reject) => {
    worker.once('message', () => resolve())
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the Message-ID index thread exited (code ${code})`)))
  })
}

if (!isMainThread && workerData?.seedMessageIdIndex) {
  const { file, sql, rows } = workerData.seedMessageIdIndex as { file: string; sql: string; rows: number }
  const db = new Database(file)
  // A scratch file, removed once copied: nothing to keep safe.
  db.pragma('journal_mode = OFF')
  db.pragma('synchronous = OFF')
  // The data directory's own index table, filled directly: its rows need no content table here.
  db.exec(sql)
  db.prepare(`${COUNTER} INSERT INTO messages_fts (rowid, message_id) SELECT 1 + i, ${MESSAGE_ID} FROM n`).run({ rows })
  db.close()
  parentPort!.postMessage('done')
}
