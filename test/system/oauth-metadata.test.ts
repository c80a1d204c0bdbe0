import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { authorizeQuery, BASE, pkce } from '../transports/oauth-flow.js'
import { createHttpApp } from '../../transports/http.js'
import { startDnsmasq } from './peers.js'

describe('system: a client id URL whose name resolves to a private address, served by dnsmasq', () => {
  const cleanup: (() => unknown)[] = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  it('refuses it on the page without saying what the name resolves to; the log says', async () => {
    const secret = `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.7`
    const dns = await startDnsmasq([`--host-record=agent.inside.test,${secret}`])
    cleanup.push(dns.stop)
    const env: TestEnv = await createTestEnv({ MAILROOM_PUBLIC_URL: BASE, MAILROOM_DNS_SERVERS: dns.server })
    cleanup.push(env.close)
    const lines: Record<string, unknown>[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    const app = createHttpApp({ ...env.services, logger })
    const clientId = 'https://agent.inside.test/client.json'
    const query = new URLSearchParams(authorizeQuery({ clientId, challenge: pkce().challenge }))
    for (const res of [
      await app.request(`/oauth/authorize?${query}`),
      await app.request('/oauth/authorize', {
        method: 'POST',
        body: new URLSearchParams({ ...Object.fromEntries(query), api_key: env.apiKey, decision: 'allow' }),
      }),
    ]) {
      expect(res.status).toBe(400)
      expect(res.headers.get('location')).toBeNull()
      const page = await res.text()
      expect(page).toContain(`the client&#39;s metadata document could not be fetched: ${clientId}`)
      expect(page).not.toContain(secret)
      expect(page).not.toMatch(/private|resolves/)
    }
    const logged = lines.filter((l) => l.msg === 'client metadata document not fetched')
    expect(logged).toHaveLength(2)
    expect(logged[0]).toMatchObject({ clientId, reason: expect.stringContaining(`${secret}, a private address`) })
    expect(await env.services.store.oauth.grants(env.accountId)).toEqual([])
  })
})
