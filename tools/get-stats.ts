import { z } from 'zod'
import { accountOf, defineTool } from './define.js'
import { activeOrders } from './common.js'
import { MailStatsType, STATS_WINDOWS } from './schemas.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR
/** How many entries each volume breakdown keeps. */
export const VOLUME_TOP = 500

export const getStats = defineTool({
  name: 'getStats',
  title: 'Usage, cost and volume statistics',
  http: { method: 'GET', path: '/mail/stats' },
  errors: [400],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Statistics of the account's active mail orders: in the window `time`, `received` (messages accepted), " +
    '`sent` (delivered) and `volume` (top 500 recipients, senders and client IPs); `usage` (messages, sandbox mail not) and ' +
    '`cost` of the current billing cycle.',
  input: z.object({
    time: z
      .enum(STATS_WINDOWS)
      .default('1h')
      .describe('The window; day: since 00:00 UTC, month: since the 1st (UTC), billing: this billing cycle.'),
  }),
  output: MailStatsType,
  handler: async ({ time }, ctx) => {
    const account = (await ctx.store.accounts.get(accountOf(ctx)))!
    const now = ctx.clock()
    const cycle = billingCycle(account.billingDay, now)
    const since = windowStart(time, now, cycle.start)
    const orderIds = (await activeOrders(ctx)).map((o) => o.id)
    const stats = await ctx.store.mail.stats({
      orderIds,
      since,
      cycleStart: cycle.start,
      cycleEnd: cycle.end,
      top: VOLUME_TOP,
    })
    return {
      time,
      usage: stats.usage,
      currency: account.currency,
      cost: cost(account.priceBase, account.pricePerMessage, stats.usage),
      received: stats.received,
      sent: stats.sent,
      volume: stats.volume,
    }
  },
})

/** base + ceil(usage × per message × 100) / 100, computed so that float noise cannot add a cent. */
export function cost(base: number, perMessage: number, usage: number): number {
  const cents = Math.ceil(Math.round(usage * perMessage * 100 * 1e6) / 1e6)
  return Math.round((base + cents / 100) * 100) / 100
}

/** The start of a stats window (epoch ms), or null for all time. */
export function windowStart(time: (typeof STATS_WINDOWS)[number], now: number, cycleStart: number): number | null {
  const d = new Date(now)
  switch (time) {
    case '1h':
      return now - HOUR
    case '24h':
      return now - DAY
    case '7d':
      return now - 7 * DAY
    case 'day':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
    case 'month':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
    case 'billing':
      return cycleStart
    case 'all':
      return null
  }
}

/** The billing cycle containing `now`: from the last billing day (00:00 UTC) to the next. */
export function billingCycle(billingDay: number, now: number): { start: number; end: number } {
  const d = new Date(now)
  let start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), billingDay)
  if (start > now) start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, billingDay)
  const s = new Date(start)
  return { start, end: Date.UTC(s.getUTCFullYear(), s.getUTCMonth() + 1, billingDay) }
}
