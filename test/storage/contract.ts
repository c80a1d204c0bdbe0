import { afterEach, beforeEach, describe } from 'vitest'
import type { Store } from '../../storage/store.js'
import { authFailuresContract } from './contract/auth-failures.js'
import { durabilityContract } from './contract/durability.js'
import { type Fixture, type OpenedStore, T0 } from './contract/fixture.js'
import { historyContract } from './contract/history.js'
import { holdsContract } from './contract/holds.js'
import { identityContract } from './contract/identity.js'
import { idempotencyContract } from './contract/idempotency.js'
import { inboundContract } from './contract/inbound.js'
import { blocksContract, rulesContract, spamFilterContract, trapsContract } from './contract/lists.js'
import { logContract } from './contract/log.js'
import { mcpSessionsContract } from './contract/mcp-sessions.js'
import { oauthContract } from './contract/oauth.js'
import { policiesContract } from './contract/policies.js'
import { queueContract } from './contract/queue.js'
import { sandboxContract } from './contract/sandbox.js'
import { serversContract } from './contract/servers.js'
import { settingsContract } from './contract/settings.js'
import { tlsPolicyContract } from './contract/tls-policy.js'
import { webhooksContract } from './contract/webhooks.js'

export type { OpenedStore }

/**
 * What any Store backend must do, stated through the Store interface alone: registers the suite
 * under `name`, each test with a fresh database from `open`.
 */
export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`Store contract: ${name}`, () => {
    const f = {} as Fixture
    let others: Store[] = []
    beforeEach(async () => {
      f.opened = await open()
      f.store = f.opened.store
      const account = (accountName: string) =>
        f.store.accounts.create({
          name: accountName,
          currency: 'USD',
          priceBase: 1,
          pricePerMessage: 0.0002,
          billingDay: 1,
          createdAt: T0,
        })
      f.accountId = (await account('a')).id
      f.otherAccountId = (await account('b')).id
      const order = async (accountId: number) =>
        (await f.store.orders.create({ accountId, comment: null, senders: [], now: T0 })).order.id
      f.orderId = await order(f.accountId)
      f.apiKey = (await f.store.apiKeys.create(f.accountId, T0)).key
      f.otherOrderId = await order(f.otherAccountId)
      f.another = async () => {
        if (!f.opened.reopen) throw new Error(`${name} cannot open a second connection`)
        const other = await f.opened.reopen()
        others.push(other)
        return other
      }
    })
    afterEach(async () => {
      for (const other of others) await other.close()
      others = []
      await f.opened.close()
    })

    identityContract(f)
    authFailuresContract(f)
    queueContract(f)
    logContract(f)
    rulesContract(f)
    blocksContract(f)
    trapsContract(f)
    spamFilterContract(f)
    settingsContract(f)
    idempotencyContract(f)
    durabilityContract(f)
    sandboxContract(f)
    webhooksContract(f)
    oauthContract(f)
    mcpSessionsContract(f)
    serversContract(f)
    historyContract(f)
    tlsPolicyContract(f)
    inboundContract(f)
    policiesContract(f)
    holdsContract(f)
  })
}
