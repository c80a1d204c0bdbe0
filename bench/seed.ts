import Database from 'better-sqlite3'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { openDataDir } from '../storage/sqlite/index.js'

/**
 * The seeded log's indexes whose keys grow with the row id (the transaction id, the order with or
 * without the time, a delivery's message). They are kept up to date during the inserts: each entry
 * lands at the end of its index, which costs less than sorting them all afterwards.
 */
const APPENDED_INDEXES = [
  'messages_txid',
  'messages_order',
  'messages_order_time',
  'deliveries_message_seq',
  'deliveries_due',
]
/** FTS5's in-memory hash size while the scratch index is built: room for a million Message-IDs' trigrams. */
const HASH_SIZE = 512 * 1024 * 1024
/** FTS5's tables behind the Message-ID index (migration 0001). */
const FTS_TABLES = ['data', 'idx', 'docsize', 'config'].map((t) => `messages_fts_${t}`)
/** The log's time span: the last 30 days. */
const SPAN = 30 * 86_400_000

/**
 * Fills the empty log of a data directory with `rows` delivered recipients (one per message),
 * spread over the filters' values: 100 senders, 100 recipients, 50 client IPs, 100 subjects, 10 MX
 * hosts, 1% undelivered, times over the last 30 days. Each value a query asks for (but a
 * transaction id or a Message-ID) then fills at least a page of 100 rows at 10,000 rows as at
 * 1,000,000, so that #4 compares the same answer from a table a hundred times larger.
 *
 * The messages go into the data directory's database in one transaction, without the WAL; their
 * secondary indexes are built once at the end, which is much faster than keeping them up to date
 * row by row, but for those whose entries are appended. Meanwhile two threads build, each in a
 * database file of its own, the deliveries with their indexes and the Message-ID trigram index,
 * copied in at the end in a second transaction. Returns values to query with.
 */
export async function seedLog(dataDir: string, rows: number, orderId: number): Promise<Record<string, string>> {
  const store = openDataDir(dataDir)
  const db = store.sqlite
  if (db.prepare('SELECT 1 FROM messages LIMIT 1').get()) throw new Error('seedLog fills an empty log only')
  const schemaOf = (table: string) =>
    db
      .prepare('SELECT type, name, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC')
      .all(table) as { type: string; name: string; sql: string }[]
  // Row i of the log, as SQL over the recursive counter n(i); every number is inlined, so that the
  // threads' statements are whole. Message i is row i + 1; its transaction id is hex(ms * 0x1000
  // + seq) plus a suffix, as the relay makes them.
  const now = Date.now()
  const counter = `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${rows - 1})`
  const ms = `CAST(${now} - (${rows} - i) * ${SPAN} / ${rows} AS INTEGER)`
  const sender = `'sender' || (i % 100) || '@bench.example'`
  const rcpt = `'rcpt' || (i % 100) || '@dest' || (i % 10) || '.example'`
  const messageId = `'<m' || i || '.bench@bench.example>'`

  // The data directory's own table and indexes: a copy into a table of the same shape moves whole
  // rows and index entries in order, without sorting anything again.
  const deliveriesSchema = schemaOf('deliveries').filter((s) => s.type !== 'trigger')
  const appended = (s: { type: string; name: string }) => s.type === 'table' || APPENDED_INDEXES.includes(s.name)
  const deliveries = buildScratch(join(dataDir, 'seed-deliveries.db'), [
    ...deliveriesSchema.filter(appended).map((s) => s.sql),
    `${counter}
     INSERT INTO deliveries (message_id, order_id, seq, recipient, domain, state, delivered, code, response, mx_hostname, locked, attempts, queued)
     SELECT 1 + i, ${orderId}, 1, ${rcpt}, 'dest' || (i % 10) || '.example', CASE WHEN i % 100 = 0 THEN 'failed' ELSE 'delivered' END,
       CASE WHEN i % 100 = 0 THEN 0 ELSE 1 END, 250, '250 ok', 'mx' || (i % 10) || '.dest.example', 0, 1,
       strftime('%Y-%m-%dT%H:%M:%fZ', ${ms} / 1000.0, 'unixepoch')
     FROM n`,
    ...deliveriesSchema.filter((s) => !appended(s)).map((s) => s.sql),
  ])
  const messageIds = buildScratch(join(dataDir, 'seed-fts.db'), [
    db.prepare("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").pluck().get() as string,
    // FTS5 keeps the index's new entries in memory until they pass its hash size (1 MB unless
    // set), then writes them out as a segment, which it merges with the earlier ones. With room
    // for all of them, it writes one segment at the end and merges nothing: 1.8 s instead of 3.4
    // for a million Message-IDs. The setting is the scratch index's own, not copied.
    `INSERT INTO messages_fts (messages_fts, rank) VALUES ('hashsize', ${HASH_SIZE})`,
    // The data directory's own index table, filled directly: its rows need no content table here.
    `${counter} INSERT INTO messages_fts (rowid, message_id) SELECT 1 + i, ${messageId} FROM n`,
    "DELETE FROM messages_fts_config WHERE k = 'hashsize'",
  ])

  // Helper threads sort the index entries: the index builds took 9 s instead of 13 when
  // everything ran in this thread. Two are enough now that the scratch threads run beside it.
  db.pragma('threads = 2')
  // The data directory is the bench's own and no server has it open. The large transactions then
  // go straight into the database file, with a rollback journal that holds only the few pages
  // there were before, instead of into the WAL, which a checkpoint then copies into the file again
  // (3 s of the seed). Nothing is synced: the bench does not outlive its data.
  db.pragma('journal_mode = DELETE')
  db.pragma('synchronous = OFF')
  // SQLite copies a table with its indexes as they are only into a table without triggers and
  // without foreign keys enforced; the copied rows refer to the messages seeded here.
  db.pragma('foreign_keys = OFF')
  const messages = schemaOf('messages')
  const triggers = [...messages, ...schemaOf('deliveries')].filter((s) => s.type === 'trigger')
  const indexes = messages.filter((s) => s.type === 'index' && !APPENDED_INDEXES.includes(s.name))
  db.transaction(() => {
    for (const { type, name } of [...indexes, ...triggers]) db.exec(`DROP ${type.toUpperCase()} "${name}"`)
    db.exec(
      `${counter}
       INSERT INTO messages (id, txid, account_id, order_id, env_from, header_from, reply_to, subject, message_id, origin, transtype,
         interface, sending_zone, body_size, rcpt_to, time, created_at)
       SELECT 1 + i, printf('%014x%04x', ${ms} * 4096 + (i % 4096), i / 4096), 1, ${orderId}, ${sender}, ${sender}, ${sender},
         'subject ' || (i % 100), ${messageId}, '192.0.2.' || (i % 50), 'HTTP', 'api', 'default', 4096, ${rcpt}, ${ms} / 1000, ${ms}
       FROM n`,
    )
    for (const { sql } of indexes) db.exec(sql)
  })()
  await Promise.all([deliveries, messageIds])
  // The index's own tables are written directly, which SQLite allows only outside its defensive mode.
  db.unsafeMode(true)
  db.prepare('ATTACH ? AS deliveries').run(deliveries.file)
  db.prepare('ATTACH ? AS fts').run(messageIds.file)
  db.transaction(() => {
    db.exec('INSERT INTO main.deliveries SELECT * FROM deliveries.deliveries')
    for (const table of FTS_TABLES)
      db.exec(`DELETE FROM main.${table}; INSERT INTO main.${table} SELECT * FROM fts.${table}`)
    for (const { sql } of triggers) db.exec(sql)
    db.prepare(
      `INSERT INTO order_counts (order_id, messages, deliveries) VALUES (?, ?, ?)
       ON CONFLICT (order_id) DO UPDATE SET messages = messages + excluded.messages, deliveries = deliveries + excluded.deliveries`,
    ).run(orderId, rows, rows)
  })()
  db.exec('DETACH deliveries; DETACH fts')
  db.unsafeMode(false)
  rmSync(deliveries.file)
  rmSync(messageIds.file)
  // Statistics from samples of each index: enough for the planner's choices, in 0.1 s instead of 2.
  db.pragma('analysis_limit = 1000')
  db.exec('ANALYZE')
  // Back to the data directory's own mode before the server opens it.
  db.pragma('journal_mode = WAL')
  const middle = db
    .prepare('SELECT txid FROM messages WHERE order_id = ? ORDER BY id LIMIT 1 OFFSET ?')
    .pluck()
    .get(orderId, Math.floor(rows / 2)) as string
  void store.close()
  return {
    from: 'sender7@bench.example',
    to: 'rcpt34@dest4.example',
    origin: '192.0.2.7',
    subject: 'subject 42',
    mailid: middle,
    messageId: `m${Math.floor(rows / 2)}.`,
    mx: 'mx3.dest.example',
  }
}

/** Runs `statements` in a thread of its own, on a new scratch database `file`; resolves when they are done. */
function buildScratch(file: string, statements: string[]): Promise<void> & { file: string } {
  const worker = new Worker(new URL(import.meta.url), { workerData: { seedScratch: { file, statements } } })
  const done = new Promise<void>((resolve, reject) => {
    worker.once('message', () => resolve())
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the seed's thread for ${file} exited (code ${code})`)))
  })
  return Object.assign(done, { file })
}

if (!isMainThread && workerData?.seedScratch) {
  const { file, statements } = workerData.seedScratch as { file: string; statements: string[] }
  const db = new Database(file)
  // A scratch file, removed once copied: nothing to keep safe. FTS5's own tables are written
  // directly, which SQLite allows only outside its defensive mode.
  db.pragma('journal_mode = OFF')
  db.pragma('synchronous = OFF')
  // No helper threads to sort: this thread ends well before the messages' (about 4 s against 6)
  // and its helpers would only take the cores from them (7.3 s in all against 7.6-8.1).
  // Its deliveries refer to messages that are in the data directory.
  db.pragma('foreign_keys = OFF')
  db.unsafeMode(true)
  for (const sql of statements) db.exec(sql)
  db.close()
  parentPort!.postMessage('done')
}
