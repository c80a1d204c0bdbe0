import { describe, expect, it } from 'vitest'
import type { Fixture } from './fixture.js'

export function durabilityContract(f: Fixture) {
  describe('durability', () => {
    // RFC 5321 §6.1: a message the server said it accepted must survive a crash of the host, not
    // only of the process. Killing the process cannot tell a commit on disk from one in the
    // operating system's cache; the setting can.
    it('has each commit on disk before it answers', async () => {
      const { durable, setting } = await f.opened.durability()
      expect(durable, setting).toBe(true)
    })
  })
}
