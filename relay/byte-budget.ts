/**
 * The byte budget: how many bytes of messages every door (REST, MCP, SMTP) may hold in memory at
 * once, in all and per account. A door reserves what a message will take before it reads it, and
 * releases the reservation once the message is committed to the queue or refused. A reservation
 * past either limit is refused at once, so that the door can say "try later" (HTTP 503 with
 * Retry-After, SMTP 451 4.3.1) before it has read anything, instead of the process running out
 * of memory.
 */
export interface ByteBudget {
  /**
   * Reserves `bytes` for `accountId` (null: not known yet, counted in the total only). Null when
   * it would pass the total or the account's limit; else a reservation to release exactly once.
   */
  reserve(bytes: number, accountId: number | null): Reservation | null
  /** Whether `bytes` would fit for `accountId` now (nothing is reserved). */
  fits(bytes: number, accountId: number | null): boolean
  /** Bytes held now, in all and by account. */
  held(): { total: number; byAccount: ReadonlyMap<number, number> }
  readonly limits: BudgetLimits
}

export interface Reservation {
  readonly bytes: number
  /**
   * Takes `more` bytes on top (a body of unknown length as it arrives, or a message that turns
   * out larger than reserved); false, with nothing taken, when that would pass a limit.
   */
  grow(more: number): boolean
  /** Gives everything back; later calls do nothing. */
  release(): void
}

export interface BudgetLimits {
  /** Most bytes held by all accounts together. */
  total: number
  /** Most bytes held by one account. */
  perAccount: number
}

/** How long a refused client is told to wait before trying again (Retry-After, in seconds). */
export const BUDGET_RETRY_AFTER_S = 5

/** A byte budget in this process's memory (each node has its own memory, so its own budget). */
export function createByteBudget(limits: BudgetLimits): ByteBudget {
  let total = 0
  const byAccount = new Map<number, number>()
  const fits = (bytes: number, accountId: number | null) =>
    total + bytes <= limits.total &&
    (accountId === null || (byAccount.get(accountId) ?? 0) + bytes <= limits.perAccount)
  const take = (bytes: number, accountId: number | null) => {
    total += bytes
    if (accountId !== null) byAccount.set(accountId, (byAccount.get(accountId) ?? 0) + bytes)
  }
  const give = (bytes: number, accountId: number | null) => {
    total -= bytes
    if (accountId === null) return
    const left = (byAccount.get(accountId) ?? 0) - bytes
    if (left > 0) byAccount.set(accountId, left)
    else byAccount.delete(accountId)
  }
  return {
    limits,
    fits,
    held: () => ({ total, byAccount }),
    reserve(bytes, accountId) {
      if (!Number.isFinite(bytes) || bytes < 0) throw new RangeError(`cannot reserve ${bytes} bytes`)
      if (!fits(bytes, accountId)) return null
      take(bytes, accountId)
      let held = bytes
      let released = false
      return {
        get bytes() {
          return held
        },
        grow(more) {
          if (released || !fits(more, accountId)) return false
          take(more, accountId)
          held += more
          return true
        },
        release() {
          if (released) return
          released = true
          give(held, accountId)
        },
      }
    },
  }
}
