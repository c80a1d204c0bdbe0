import type Database from 'better-sqlite3'
import type { ServerHeartbeat, Store } from '../store.js'
import { groupCommit } from './group-commit.js'

/** The running servers' heartbeats (see Store['servers']). */
export function createServerStore(sqlite: Database.Database): Store['servers'] {
  const q = {
    beat: sqlite.prepare(`INSERT INTO servers (id, node, url, delivery, beat_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET node = excluded.node, url = excluded.url, delivery = excluded.delivery,
        beat_at = excluded.beat_at`),
    running: sqlite.prepare(
      'SELECT id, node, url, delivery, beat_at AS beatAt FROM servers WHERE beat_at >= ? ORDER BY beat_at DESC, id',
    ),
    end: sqlite.prepare('DELETE FROM servers WHERE id = ?'),
    sweep: sqlite.prepare('DELETE FROM servers WHERE beat_at < ?'),
  }
  // The writes of one turn of the event loop share a commit and its fsync (group-commit.ts).
  const write = groupCommit(sqlite, (work: () => number) => work())
  return {
    async beat({ id, node, url, delivery }, now) {
      await write(() => q.beat.run(id, node, url, delivery, now).changes)
    },
    async running(since) {
      return q.running.all(since) as ServerHeartbeat[]
    },
    async end(id) {
      await write(() => q.end.run(id).changes)
    },
    async sweep(before) {
      return write(() => q.sweep.run(before).changes)
    },
  }
}
