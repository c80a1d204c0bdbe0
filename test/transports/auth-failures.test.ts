import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createAccount } from '../../accounts.js'
import { loadConfig } from '../../config.js'
import { createServices } from '../../runtime.js'
import { openPostgresStore } from '../../storage/postgres/index.js'
import { openDataDir } from '../../storage/sqlite/index.js'
import type { Store } from '../../storage/store.js'
import { createHttpApp } from '../../transports/http.js'
import { silentLogger, testClock } from '../helpers.js'
import { createTestDatabase, describePostgres } from '../storage/postgres.js'

const WRONG = 'mr_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG'
const MAX = 3

/**
 * #35 item 15: two nodes on one database (their own store connections, apps and caches) share
 * one count of wrong keys per client address: guesses sent to both hit the limit at
 * MAILROOM_HTTP_MAX_AUTH_FAILURES together, not that many on each.
 */
async function twoNodesShareTheCount(stores: [Store, Store]) {
  const config = loadConfig({ MAILROOM_DATA_DIR: '/nonexistent', MAILROOM_HTTP_MAX_AUTH_FAILURES: String(MAX) })
  const clock = testClock()
  const [one, two] = stores.map((store) => createServices(store, config, { logger: silentLogger, clock }))
  const { apiKey } = await createAccount(one, 'a')
  const apps = [createHttpApp(one), createHttpApp(two)]
  const get = (node: number, key: string) => apps[node].request('/mail', { headers: { 'X-API-KEY': key } })
  // A new key is in force on the other node once its settings cache saw the change.
  await expect.poll(async () => (await get(1, apiKey)).status, { timeout: 10_000 }).toBe(200)

  // MAX wrong keys between the two nodes: each a 401, the last one starting the throttle.
  for (const node of [0, 1, 0]) expect((await get(node, WRONG)).status).toBe(401)
  // The next guess is refused on either node, and a right key too: within the settings cache's delay on the other.
  const refused = await get(1, WRONG)
  expect(refused.status).toBe(429)
  expect(refused.headers.get('retry-after')).toMatch(/^\d+$/)
  expect((await refused.json()).message).toMatch(/^too many wrong API keys from this address: try again in \d+ s$/)
  expect((await get(0, apiKey)).status).toBe(429)
  await expect.poll(async () => (await get(1, apiKey)).status, { timeout: 10_000 }).toBe(429)

  // Once the window has passed, the right key works on both and the count starts again.
  clock.advance(15 * 60_000 + 1)
  expect((await get(0, apiKey)).status).toBe(200)
  expect((await get(1, apiKey)).status).toBe(200)
  expect((await get(1, WRONG)).status).toBe(401)
  expect((await get(0, apiKey)).status).toBe(200)
}

describe('wrong keys counted in the store', () => {
  const cleanups: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  it('SQLite: two processes on one data directory share the count', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-auth-'))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    const stores: [Store, Store] = [openDataDir(dir), openDataDir(dir)]
    for (const store of stores) cleanups.push(() => store.close())
    await twoNodesShareTheCount(stores)
  })

  it('a right key writes nothing, and counts whose window passed are swept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-auth-'))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    const store = openDataDir(dir)
    cleanups.push(() => store.close())
    const config = loadConfig({ MAILROOM_DATA_DIR: '/nonexistent' })
    const clock = testClock()
    const services = createServices(store, config, { logger: silentLogger, clock })
    const { apiKey } = await createAccount(services, 'a')
    const app = createHttpApp(services)
    const rows = () => store.sqlite.prepare('SELECT client, count FROM auth_failures').all()
    for (let i = 0; i < 3; i++)
      expect((await app.request('/mail', { headers: { 'X-API-KEY': apiKey } })).status).toBe(200)
    expect(rows()).toEqual([])
    expect((await app.request('/mail', { headers: { 'X-API-KEY': WRONG } })).status).toBe(401)
    expect(rows()).toEqual([{ client: expect.stringMatching(/^http /), count: 1 }])
    expect(await store.authFailures.sweep(clock() - 15 * 60_000)).toBe(0)
    expect(await store.authFailures.sweep(clock() + 1)).toBe(1)
    expect(rows()).toEqual([])
  })
})

await describePostgres('wrong keys counted in PostgreSQL', () => {
  it('two nodes on one database share the count', async () => {
    const database = await createTestDatabase()
    const secret = randomBytes(32)
    const stores = [
      await openPostgresStore({ url: database.url, secret }),
      await openPostgresStore({ url: database.url, secret }),
    ] as [Store, Store]
    try {
      await twoNodesShareTheCount(stores)
    } finally {
      for (const store of stores) await store.close()
      await database.drop()
    }
  })
})
