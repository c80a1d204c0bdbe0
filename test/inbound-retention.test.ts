import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../config.js'
import { openDataDir } from '../storage/sqlite/index.js'
import { DAY_MS } from '../storage/store.js'
import { startServer } from './helpers.js'
import { ed25519 } from './storage/contract/fixture.js'
import { inboundMessage } from './storage/contract/inbound.js'

describe('MAILROOM_INBOUND_RETENTION', { timeout: 120_000 }, () => {
  let dataDir: string
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }))

  it('mailroom serve deletes received messages older than it at start, with their bytes', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-retention-'))
    const store = openDataDir(dataDir)
    const now = Date.now()
    const { id: accountId } = await store.accounts.create({
      name: 'a',
      currency: 'USD',
      priceBase: 1,
      pricePerMessage: 0,
      billingDay: 1,
      createdAt: now,
    })
    await store.domains.addKey({
      domain: 'in.example',
      accountId,
      selector: 's1',
      algorithm: 'ed25519',
      ...ed25519(),
      now,
    })
    await store.inbound.setReceiving({ accountId, domain: 'in.example', receiving: true, catchAll: false, now })
    await store.inbound.addInbox({ accountId, address: 'agent@in.example', now })
    const [old] = await store.inbound.receive(inboundMessage(accountId, { receivedAt: now - 8 * DAY_MS }))
    const [young] = await store.inbound.receive(inboundMessage(accountId, { receivedAt: now - 6 * DAY_MS }))
    await store.close()
    const server = await startServer(
      loadConfig({
        MAILROOM_DATA_DIR: dataDir,
        MAILROOM_HTTP_PORT: '0',
        MAILROOM_SMTP_PORT: '0',
        MAILROOM_SMTPS_PORT: '0',
        MAILROOM_LOG_LEVEL: 'silent',
        MAILROOM_INBOUND_RETENTION: '7d',
      }),
    )
    await server.stop()
    const after = openDataDir(dataDir)
    try {
      expect(await after.inbound.raw(old.id, accountId)).toBeUndefined()
      expect(await after.inbound.raw(young.id, accountId)).toBeDefined()
      expect(after.sqlite.prepare('SELECT COUNT(*) FROM inbound_bodies').pluck().get()).toBe(1)
    } finally {
      await after.close()
    }
  })
})
