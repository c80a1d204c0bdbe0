import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { DEFAULT_POLICY, type SendPolicy, type Store } from '../../../storage/store.js'
import { ed25519, type Fixture, T0 } from './fixture.js'

/**
 * A change made through one connection is in force on every other within a second: a key revoked,
 * a rule added or an order canceled on one node or with the CLI holds on every node.
 */
const CHANGE_SEEN_WITHIN_MS = 1000

/** Reads until `read` answers `expected`, for as long as a change may take to be seen; resolves with the last answer. */
async function seen<T>(read: () => Promise<T>, expected: T): Promise<T> {
  const deadline = Date.now() + CHANGE_SEEN_WITHIN_MS
  for (;;) {
    const value = await read()
    try {
      expect(value).toEqual(expected)
      return value
    } catch (err) {
      if (Date.now() >= deadline) throw err
    }
    await sleep(10)
  }
}

/** A change to the settings every send reads, through `other`, and how a store reads it. */
interface SettingChange {
  read(f: Fixture, store: Store): Promise<unknown>
  change(f: Fixture, other: Store): Promise<unknown>
  /** Takes the change back, where the store can. */
  undo?(f: Fixture, other: Store): Promise<unknown>
}

/** A field of the fixture's order, read one by one and in the account's list. */
const orderRead =
  (field: 'status' | 'senders'): SettingChange['read'] =>
  async (f, store) => [(await store.orders.get(f.orderId))?.[field], (await store.orders.list(f.accountId))[0][field]]

/** Puts an address on the fixture account's internal list. */
const listInternally =
  (kind: 'sender' | 'recipient', address: string, reason: string): SettingChange['change'] =>
  (f, other) =>
    other.blocks.addToList({ accountId: f.accountId, source: 'internal', kind, address, reason, now: T0 })

const SEND_POLICY: SendPolicy = { ...DEFAULT_POLICY, approval: 'always', maxPerHour: 20 }

const SETTING_CHANGES: [string, SettingChange][] = [
  // Before the key's revocation: the policy is read through the key.
  [
    "an API key's send policy",
    {
      read: async (f, store) => (await store.apiKeys.owner(f.apiKey))?.policy,
      change: async (f, other) =>
        other.policies.set({ kind: 'key', id: (await other.apiKeys.list(f.accountId))[0].id }, SEND_POLICY),
      undo: async (f, other) =>
        other.policies.set({ kind: 'key', id: (await other.apiKeys.list(f.accountId))[0].id }, null),
    },
  ],
  [
    "an order's send policy",
    {
      read: async (f, store) => [
        (await store.orders.get(f.orderId))?.policy,
        (await store.orders.list(f.accountId))[0].policy,
      ],
      change: (f, other) => other.policies.set({ kind: 'order', id: f.orderId }, SEND_POLICY),
      undo: (f, other) => other.policies.set({ kind: 'order', id: f.orderId }, null),
    },
  ],
  [
    'an API key revoked',
    {
      read: async (f, store) => store.apiKeys.authenticate(f.apiKey),
      change: async (f, other) => other.apiKeys.revoke((await other.apiKeys.list(f.accountId))[0].id, T0),
    },
  ],
  [
    'an order canceled',
    {
      read: orderRead('status'),
      change: (f, other) => other.orders.setStatus(f.orderId, 'canceled'),
      undo: (f, other) => other.orders.setStatus(f.orderId, 'active'),
    },
  ],
  [
    "an order's authorized sender",
    {
      read: orderRead('senders'),
      change: (f, other) => other.orders.addSender(f.orderId, 'Boss@A.example'),
      undo: (f, other) => other.orders.removeSender(f.orderId, 'boss@a.example'),
    },
  ],
  [
    'a deny rule',
    {
      read: async (f, store) => (await store.rules.list([f.orderId])).map((r) => r.data),
      change: (f, other) => other.rules.create({ orderId: f.orderId, type: 'domain', data: 'c.example', now: T0 }),
      undo: async (f, other) => other.rules.delete((await other.rules.list([f.orderId]))[0].id, [f.orderId]),
    },
  ],
  [
    'a blocked sender',
    {
      read: async (f, store) => (await store.blocks.blockedSender(f.accountId, 'Spam@a.example'))?.reason,
      change: listInternally('sender', 'spam@a.example', 'trap hit'),
      undo: (f, other) => other.blocks.delist(f.accountId, 'spam@a.example'),
    },
  ],
  [
    'a suppressed recipient',
    {
      read: async (f, store) => (await store.blocks.suppressed(f.accountId, 'gone@b.example'))?.reason,
      change: listInternally('recipient', 'gone@b.example', 'bounced'),
      undo: (f, other) => other.blocks.removeFromList(f.accountId, 'gone@b.example', 'recipient'),
    },
  ],
  [
    'a trap',
    {
      read: async (_f, store) => store.traps.match('anyone@trap.example'),
      change: (_f, other) => other.traps.add('@trap.example', T0),
      undo: (_f, other) => other.traps.remove('@trap.example'),
    },
  ],
  [
    'a DKIM key',
    {
      read: async (_f, store) => (await store.domains.signingKey('a.example'))?.selector,
      change: (f, other) =>
        other.domains.addKey({
          domain: 'a.example',
          accountId: f.accountId,
          selector: 's1',
          algorithm: 'ed25519',
          ...ed25519(),
          now: T0,
        }),
      undo: (_f, other) => other.domains.remove('a.example'),
    },
  ],
]

export function settingsContract(f: Fixture) {
  describe('settings changed through another connection', () => {
    it.each(SETTING_CHANGES)('sees a change made through the other: %s, and its undoing', async (_label, setting) => {
      const other = await f.another()
      // Read first: a backend that keeps what it read must notice the other connection's change.
      const before = await setting.read(f, f.store)
      await setting.change(f, other)
      const after = await setting.read(f, other)
      expect(after).not.toEqual(before)
      await seen(() => setting.read(f, f.store), after)
      if (!setting.undo) return
      await setting.undo(f, other)
      expect(await setting.read(f, other)).toEqual(before)
      await seen(() => setting.read(f, f.store), before)
    })

    it("sees its own connection's changes at once", async () => {
      for (const [, setting] of SETTING_CHANGES) {
        const before = await setting.read(f, f.store)
        await setting.change(f, f.store)
        expect(await setting.read(f, f.store)).not.toEqual(before)
      }
    })
  })
}
