import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { bootstrap } from '../accounts.js'
import { loadConfig } from '../config.js'
import { createServices } from '../runtime.js'
import { openPostgresStore } from '../storage/postgres/index.js'
import { openDataDir } from '../storage/sqlite/index.js'
import type { Store } from '../storage/store.js'
import { silentLogger } from './helpers.js'
import { createTestDatabase, describePostgres } from './storage/postgres.js'

const NODES = 4

/**
 * #35 item 16: several nodes started at once on an empty database each run the first start's
 * bootstrap; exactly one makes the first account (one banner), and the others find it made.
 */
async function raceBootstraps(stores: Store[]) {
  const config = loadConfig({ MAILROOM_DATA_DIR: '/nonexistent' })
  const results = await Promise.all(
    stores.map((store) => bootstrap(createServices(store, config, { logger: silentLogger }))),
  )
  const made = results.filter((r) => r !== null)
  expect(made).toHaveLength(1)
  const [store] = stores
  const accounts = await store.accounts.list()
  expect(accounts.map((a) => a.name)).toEqual(['default'])
  expect(await store.apiKeys.list(accounts[0].id)).toHaveLength(1)
  expect(await store.apiKeys.authenticate(made[0]!.apiKey)).toBe(accounts[0].id)
  const orders = await store.orders.list(accounts[0].id)
  expect(orders.map((o) => o.id)).toEqual([made[0]!.order.id])
  expect(await store.orders.password(orders[0].id)).toBe(made[0]!.password)
  // Started again, nobody makes another.
  expect(await bootstrap(createServices(store, config, { logger: silentLogger }))).toBeNull()
}

describe('the first start on an empty database', () => {
  const cleanups: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  it('SQLite: processes racing on one data directory make one first account', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-bootstrap-'))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    const first = openDataDir(dir)
    const stores = [first, ...Array.from({ length: NODES - 1 }, () => openDataDir(dir))]
    for (const store of stores) cleanups.push(() => store.close())
    await raceBootstraps(stores)
  })
})

await describePostgres('the first start on an empty PostgreSQL database', () => {
  it('nodes racing on one database make one first account', async () => {
    const database = await createTestDatabase()
    const secret = randomBytes(32)
    const stores = await Promise.all(
      Array.from({ length: NODES }, () => openPostgresStore({ url: database.url, secret })),
    )
    try {
      await raceBootstraps(stores)
    } finally {
      for (const store of stores) await store.close()
      await database.drop()
    }
  })
})
