import { randomBytes } from 'node:crypto'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { createAccount } from '../../accounts.js'
import { loadConfig } from '../../config.js'
import { createServices } from '../../runtime.js'
import { openPostgresStore, type PostgresStore } from '../../storage/postgres/index.js'
import { createHttpApp } from '../../transports/http.js'
import { silentLogger } from '../helpers.js'
import { createTestDatabase, describePostgres } from '../storage/postgres.js'
import { authorize, BASE, exchangeFields, MCP_RESOURCE, mcpWithToken, pkce, register, token } from './oauth-flow.js'

const ROUNDS = 30
const toolsList = { jsonrpc: '2.0', id: 1, method: 'tools/list' }

// The authorization server on two nodes of one database: what one node does with a code, the other sees.
await describePostgres('OAuth on PostgreSQL, two nodes', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let stores: PostgresStore[] = []
  const node = async () => {
    const store = await openPostgresStore({ url: database.url, secret: randomBytes(32) })
    stores.push(store)
    // The refused tokens of 30 rounds are wrong keys, counted for both nodes together: not this test's subject.
    const config = loadConfig({
      MAILROOM_DATA_DIR: '/nonexistent',
      MAILROOM_PUBLIC_URL: BASE,
      MAILROOM_HTTP_MAX_AUTH_FAILURES: '100000',
    })
    const services = createServices(store, config, { logger: silentLogger })
    return { services, app: createHttpApp(services) }
  }

  beforeEach(async () => {
    database = await createTestDatabase()
  })
  afterEach(async () => {
    for (const store of stores) await store.close()
    stores = []
    await database.drop()
  })

  it('gives a code exchanged on both nodes at once to one of them, or revokes it for real', async () => {
    const [a, b] = [await node(), await node()]
    const { account, apiKey } = await createAccount(a.services, 'racer')
    const clientId = await register(a.app)
    for (let round = 0; round < ROUNDS; round++) {
      const { verifier, challenge } = pkce()
      const back = await authorize(a.app, { clientId, apiKey, challenge })
      const fields = exchangeFields(back, verifier, clientId)
      const answers = await Promise.all([token(a.app, fields), token(b.app, fields)])
      const bodies = (await Promise.all(answers.map((r) => r.json()))) as Record<string, string>[]
      const won = answers.findIndex((r) => r.status === 200)
      expect(answers.map((r) => r.status).sort(), `round ${round}`).toEqual([200, 400])
      const lost = bodies[1 - won]
      expect(lost.error).toBe('invalid_grant')
      const revoked = /revoked/.test(lost.error_description)
      // Told "revoked": the tokens the other node gave are refused on both nodes. Else they work.
      for (const app of [a.app, b.app]) {
        const res = await mcpWithToken(app, bodies[won].access_token, toolsList)
        expect(res.status, `round ${round}: told revoked: ${revoked}`).toBe(revoked ? 401 : 200)
      }
      const refreshed = await token(b.app, {
        grant_type: 'refresh_token',
        refresh_token: bodies[won].refresh_token,
        client_id: clientId,
        resource: MCP_RESOURCE,
      })
      expect(refreshed.status, `round ${round}`).toBe(revoked ? 400 : 200)
      for (const g of await a.services.store.oauth.grants(account.id)) await a.services.store.oauth.revoke(g.id)
    }
  })
})
