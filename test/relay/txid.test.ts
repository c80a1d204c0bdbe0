import { describe, expect, it } from 'vitest'
import { createTxidGenerator } from '../../relay/txid.js'

describe('transaction ids', () => {
  const NOW = Date.UTC(2026, 10, 22, 12, 0, 0)

  it('are 18 lower-case hex characters: hex(ms * 0x1000 + seq) then the instance suffix', () => {
    const next = createTxidGenerator(0xbeef)
    const id = next(NOW)
    expect(id).toMatch(/^[0-9a-f]{18}$/)
    expect(id.endsWith('beef')).toBe(true)
    expect(BigInt(`0x${id.slice(0, -4)}`) / 0x1000n).toBe(BigInt(NOW))
  })

  it('never repeat, even past 4096 in one millisecond', () => {
    const next = createTxidGenerator(1)
    const ids = new Set(Array.from({ length: 10_000 }, () => next(NOW)))
    expect(ids.size).toBe(10_000)
  })

  it('differ between instances in the same millisecond', () => {
    const a = createTxidGenerator(1)
    const b = createTxidGenerator(2)
    expect(a(NOW)).not.toBe(b(NOW))
  })

  it('grow with time, so they sort in acceptance order', () => {
    const next = createTxidGenerator(7)
    const ids = [next(NOW), next(NOW + 1), next(NOW + 1000), next(NOW + 86_400_000)]
    expect([...ids].sort()).toEqual(ids)
  })

  it('become 19 characters once the clock passes 2^44 ms (in the year 2527)', () => {
    expect(createTxidGenerator(0)(2 ** 44 - 1)).toMatch(/^[0-9a-f]{18}$/)
    expect(createTxidGenerator(0)(2 ** 44)).toMatch(/^[0-9a-f]{19}$/)
  })
})
