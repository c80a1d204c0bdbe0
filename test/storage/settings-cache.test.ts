import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openDataDir, type SqliteStore } from '../../storage/sqlite/index.js'

/** The next turn of the event loop: a cached read checks the settings' version once per turn. */
const nextTurn = () => new Promise((r) => setImmediate(r))

// The settings every send reads are cached per connection. Two stores over one data directory
// stand for the server and another writer (the engine thread, or the admin command's process).
describe('settings cache', () => {
  let dir: string
  let server: SqliteStore
  let other: SqliteStore
  let accountId: number
  let orderId: number
  let apiKey: string

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-settings-'))
    server = openDataDir(dir)
    other = openDataDir(dir)
    accountId = (
      await server.accounts.create({
        name: 'a',
        currency: 'USD',
        priceBase: 1,
        pricePerMessage: 0.0002,
        billingDay: 1,
        createdAt: 0,
      })
    ).id
    apiKey = (await server.apiKeys.create(accountId, 0)).key
    orderId = (await server.orders.create({ accountId, comment: null, senders: ['@a.example'], now: 0 })).order.id
  })
  afterEach(async () => {
    await server.close()
    await other.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Everything a send reads, as the server's store answers it now. */
  const reads = async () => ({
    key: await server.apiKeys.authenticate(apiKey),
    order: await server.orders.get(orderId),
    orders: (await server.orders.list(accountId)).map((o) => `${o.id} ${o.status} ${o.senders.join(',')}`),
    rules: (await server.rules.list([orderId])).map((r) => `${r.type} ${r.data}`),
    blockedSender: (await server.blocks.blockedSender(accountId, 'Spam@A.example'))?.reason,
    suppressed: (await server.blocks.suppressed(accountId, 'gone@b.example')) !== undefined,
    trap: await server.traps.match('anyone@trap.example'),
  })

  it("sees another connection's changes from the next turn on", async () => {
    const before = await reads()
    expect(before).toMatchObject({
      key: accountId,
      orders: [`${orderId} active @a.example`],
      rules: [],
      blockedSender: undefined,
      suppressed: false,
      trap: undefined,
    })
    await nextTurn()

    const keyId = (await other.apiKeys.list(accountId))[0].id
    await other.apiKeys.revoke(keyId, 1)
    await other.orders.addSender(orderId, 'boss@b.example')
    await other.orders.setStatus(orderId, 'canceled')
    await other.rules.create({ orderId, type: 'domain', data: 'c.example', now: 1 })
    await other.blocks.addToList({
      accountId,
      source: 'internal',
      kind: 'sender',
      address: 'spam@a.example',
      reason: 'trap hit',
      now: 1,
    })
    await other.blocks.addToList({
      accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'gone@b.example',
      reason: 'bounced',
      now: 1,
    })
    await other.traps.add('@trap.example', 1)
    await nextTurn()

    expect(await reads()).toEqual({
      key: undefined,
      order: expect.objectContaining({ status: 'canceled', senders: ['@a.example', 'boss@b.example'] }),
      orders: [`${orderId} canceled @a.example,boss@b.example`],
      rules: ['domain c.example'],
      blockedSender: 'trap hit',
      suppressed: true,
      trap: '@trap.example',
    })

    // And the way back: removals are seen too.
    await other.rules.delete((await other.rules.list([orderId]))[0].id, [orderId])
    await other.blocks.delist(accountId, 'spam@a.example')
    await other.blocks.removeFromList(accountId, 'gone@b.example', 'recipient')
    await other.traps.remove('@trap.example')
    await other.orders.removeSender(orderId, 'boss@b.example')
    await nextTurn()
    expect(await reads()).toMatchObject({
      orders: [`${orderId} canceled @a.example`],
      rules: [],
      blockedSender: undefined,
      suppressed: false,
      trap: undefined,
    })
  })

  it("sees its own connection's changes at once, in the same turn", async () => {
    await reads()
    await server.rules.create({ orderId, type: 'email', data: 'x@c.example', now: 1 })
    await server.traps.add('anyone@trap.example', 1)
    await server.blocks.addToList({
      accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'gone@b.example',
      reason: 'bounced',
      now: 1,
    })
    await server.orders.setStatus(orderId, 'canceled')
    await server.apiKeys.revoke((await server.apiKeys.list(accountId))[0].id, 1)
    expect(await reads()).toMatchObject({
      key: undefined,
      order: { status: 'canceled' },
      rules: ['email x@c.example'],
      suppressed: true,
      trap: 'anyone@trap.example',
    })
  })

  it('hands out values no caller can change for the others', async () => {
    const order = (await server.orders.get(orderId))!
    expect(() => order.senders.push('me@evil.example')).toThrow(TypeError)
    expect(() => Object.assign(order, { status: 'canceled' })).toThrow(TypeError)
    await nextTurn()
    expect(await server.orders.get(orderId)).toMatchObject({ status: 'active', senders: ['@a.example'] })
  })

  it('answers right past the number of entries it keeps', async () => {
    await server.blocks.addToList({
      accountId,
      source: 'internal',
      kind: 'recipient',
      address: 'r7@b.example',
      reason: 'bounced',
      now: 1,
    })
    for (let i = 0; i < 12_000; i++) {
      expect((await server.blocks.suppressed(accountId, `r${i}@b.example`)) !== undefined).toBe(i === 7)
    }
    expect(await server.blocks.suppressed(accountId, 'r7@b.example')).toBeDefined()
  })
})
