import { randomBytes } from 'node:crypto'
import { afterAll } from 'vitest'
import { openPostgresStore } from '../../storage/postgres/index.js'
import { type OpenedStore, storeContract } from './contract.js'
import { createTestDatabase, describePostgres, emptyTables } from './postgres.js'

await describePostgres('Store contract: PostgreSQL', () => {
  const secret = randomBytes(32)
  // One database for the file, created at the first test, emptied before each.
  let database: Promise<Awaited<ReturnType<typeof createTestDatabase>>> | undefined
  afterAll(async () => {
    await (await database)?.drop()
  })

  storeContract('PostgreSQL', async (): Promise<OpenedStore> => {
    const { url } = await (database ??= createTestDatabase())
    const store = await openPostgresStore({ url, secret })
    await emptyTables(store.pool)
    return {
      store,
      // Another node on the same database.
      reopen: () => openPostgresStore({ url, secret }),
      close: () => store.close(),
      bodyParts: async () =>
        (await store.pool.query<{ n: number }>('SELECT COUNT(*)::int AS n FROM message_bodies')).rows[0].n,
      // A commit returns once its WAL is flushed to disk: synchronous_commit on, and fsync on.
      async durability() {
        const setting = async (name: string) => (await store.pool.query(`SHOW ${name}`)).rows[0][name] as string
        const [commit, fsync] = [await setting('synchronous_commit'), await setting('fsync')]
        return {
          durable: ['on', 'remote_write', 'remote_apply'].includes(commit) && fsync === 'on',
          setting: `synchronous_commit=${commit}, fsync=${fsync}`,
        }
      },
    }
  })
})
