import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { createByteBudget } from '../../relay/byte-budget.js'

describe('byte budget', () => {
  it('refuses a reservation past the total, and gives bytes back on release', () => {
    const budget = createByteBudget({ total: 100, perAccount: 80 })
    const a = budget.reserve(60, 1)!
    const b = budget.reserve(30, 2)!
    expect(budget.reserve(20, 3)).toBeNull()
    expect(budget.held().total).toBe(90)
    a.release()
    a.release()
    expect(budget.held().total).toBe(30)
    expect(budget.reserve(70, 3)).not.toBeNull()
    b.release()
  })

  it('refuses one account past its own limit while another still gets bytes', () => {
    const budget = createByteBudget({ total: 100, perAccount: 50 })
    expect(budget.reserve(40, 1)).not.toBeNull()
    expect(budget.reserve(20, 1)).toBeNull()
    expect(budget.reserve(20, 2)).not.toBeNull()
    expect(budget.held().byAccount.get(1)).toBe(40)
  })

  it('grows a reservation only within the limits, and releases what it grew', () => {
    const budget = createByteBudget({ total: 100, perAccount: 100 })
    const r = budget.reserve(10, null)!
    expect(r.grow(50)).toBe(true)
    expect(r.grow(50)).toBe(false)
    expect(r.bytes).toBe(60)
    r.release()
    expect(budget.held().total).toBe(0)
    expect(r.grow(1)).toBe(false)
  })

  it('is refused in the configuration when one account could never hold the largest body', () => {
    expect(() => loadConfig({ MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '10mb' })).toThrow(
      /MAILROOM_MEMORY_BUDGET_PER_ACCOUNT/,
    )
    expect(() => loadConfig({ MAILROOM_MEMORY_BUDGET: '100mb', MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '128mb' })).toThrow(
      /at least MAILROOM_MEMORY_BUDGET_PER_ACCOUNT/,
    )
    expect(loadConfig({}).memoryBudget).toEqual({ total: 256 * 1024 ** 2, perAccount: 128 * 1024 ** 2 })
  })
})
