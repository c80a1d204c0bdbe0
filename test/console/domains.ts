import type { Runtime } from '../../runtime.js'
import { generateDkimKey } from '../../relay/dkim.js'
import { startDnsmasq } from '../system/peers.js'

/** The sending domain of the console's tests; its DNS is dnsmasq's. */
export const DOMAIN = 'inside.test'
/** This relay's host as the SPF record names it. */
export const NODE = 'relay.inside.test'

/**
 * A DNS server (dnsmasq) that publishes the DKIM record of a key made now and the SPF record of
 * DOMAIN, and no DMARC record; `env` points the server at it, `setup` gives account 1 the domain
 * with that key.
 */
export async function startDomainDns() {
  const key = generateDkimKey('ed25519')
  const dns = await startDnsmasq([
    `--txt-record=mr-a._domainkey.${DOMAIN},v=DKIM1; k=ed25519; p=${key.publicKey}`,
    `--txt-record=${DOMAIN},v=spf1 a:${NODE} ~all`,
  ])
  return {
    env: { MAILROOM_DNS_SERVERS: dns.server, MAILROOM_NODE_NAME: NODE },
    setup: async (admin: Runtime) => {
      await admin.store.domains.addKey({
        domain: DOMAIN,
        accountId: 1,
        selector: 'mr-a',
        algorithm: 'ed25519',
        ...key,
        now: Date.now(),
      })
    },
    stop: dns.stop,
  }
}
