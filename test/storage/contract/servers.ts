import { describe, expect, it } from 'vitest'
import { type Fixture, T0 } from './fixture.js'

const server = (id: string, node = 'relay-1') => ({
  id,
  node,
  url: `http://${node}:8080`,
  delivery: 'the smarthost 127.0.0.1:2626',
})

export function serversContract(f: Fixture) {
  describe('running servers', () => {
    it('shows a server from its first beat, on every connection, renewed by the next, until it ends', async () => {
      const other = await f.another()
      expect(await f.store.servers.running(T0)).toEqual([])
      await f.store.servers.beat(server('s-1'), T0)
      expect(await other.servers.running(T0)).toEqual([{ ...server('s-1'), beatAt: T0 }])
      await other.servers.beat({ ...server('s-1'), url: 'http://relay-1:9090' }, T0 + 5000)
      expect(await f.store.servers.running(T0 + 1)).toEqual([
        { ...server('s-1'), url: 'http://relay-1:9090', beatAt: T0 + 5000 },
      ])
      await f.store.servers.end('s-1')
      expect(await other.servers.running(0)).toEqual([])
    })

    it('leaves out, and sweeps, the servers last heard of before a time; the most recent first', async () => {
      await f.store.servers.beat(server('dead', 'relay-0'), T0 - 60_000)
      await f.store.servers.beat(server('s-1'), T0)
      await f.store.servers.beat(server('s-2', 'relay-2'), T0 + 1000)
      expect((await f.store.servers.running(T0 - 30_000)).map((s) => s.id)).toEqual(['s-2', 's-1'])
      expect(await f.store.servers.sweep(T0 - 30_000)).toBe(1)
      expect((await f.store.servers.running(0)).map((s) => s.id)).toEqual(['s-2', 's-1'])
    })
  })
}
