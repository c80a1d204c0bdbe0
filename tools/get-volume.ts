import { z } from 'zod'
import { badInput, notFound } from '../errors.js'
import { BUCKET_MS, VOLUME_COUNTS, type VolumeBucket, type VolumeCounts } from '../storage/store.js'
import { accountOf, defineTool } from './define.js'
import { MailVolume } from './history-schemas.js'
import { DateOrTimestamp, Username } from './schemas.js'
import { toEpochSeconds } from './view-mail-log.js'

/** The most buckets one answer holds. */
export const MAX_BUCKETS = 1000
/** The default window, in buckets ending with the current one: the last 7 days, or 48 hours. */
export const DEFAULT_BUCKETS = { day: 7, hour: 48 } as const

const zeros = (): VolumeCounts => ({ accepted: 0, delivered: 0, deferred: 0, failed: 0, refused: 0 })

export const getVolume = defineTool({
  name: 'getVolume',
  title: 'Mail volume over time',
  http: { method: 'GET', path: '/mail/volume' },
  errors: [400, 404],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "The account's mail per hour or UTC day, oldest first, every bucket of the window: `accepted` recipients, " +
    'delivery attempts `delivered`, `deferred` and `failed`, and sends `refused` by deny rules or the spam ' +
    'filter; `totals` sums them. Default window: the last 7 days (day) or 48 hours (hour).',
  input: z.object({
    interval: z.enum(['hour', 'day']).default('day'),
    startTime: DateOrTimestamp.optional().describe('From this time (its bucket on); written as viewMailLog dates.'),
    endTime: DateOrTimestamp.optional().describe('Up to this time (its bucket included); default now.'),
    user: Username.optional().describe('One mail order, mb<id>; default all.'),
  }),
  output: MailVolume,
  handler: async (input, ctx) => {
    const accountId = accountOf(ctx)
    const now = ctx.clock()
    const { interval } = input
    const size = BUCKET_MS[interval]
    const end = input.endTime === undefined ? now : toEpochSeconds('endTime', input.endTime, 'end', now) * 1000
    const start =
      input.startTime === undefined
        ? bucketOf(end, size) - (DEFAULT_BUCKETS[interval] - 1) * size
        : toEpochSeconds('startTime', input.startTime, 'start', now) * 1000
    if (start > end) throw badInput('startTime: it is after endTime')
    const from = bucketOf(start, size)
    const to = bucketOf(end, size) + size
    const count = (to - from) / size
    if (count > MAX_BUCKETS)
      throw badInput(
        `startTime: the window holds ${count} ${interval}s, more than ${MAX_BUCKETS}; narrow it${interval === 'hour' ? ' or use interval=day' : ''}`,
      )
    const orders = await ctx.store.orders.list(accountId)
    const orderIds = input.user
      ? orders.filter((o) => `mb${o.id}` === input.user).map((o) => o.id)
      : orders.map((o) => o.id)
    if (input.user && orderIds.length === 0) throw notFound(`user: ${input.user} is not a mail order of this account`)
    const counted = new Map((await ctx.store.mail.volume({ orderIds, from, to, interval })).map((b) => [b.time, b]))
    const totals = zeros()
    const buckets = Array.from({ length: count }, (_, i) => {
      const time = from + i * size
      const b: VolumeCounts = counted.get(time) ?? zeros()
      for (const c of VOLUME_COUNTS) totals[c] += b[c]
      return { time: new Date(time).toISOString(), ...countsOf(b) }
    })
    return { interval, startTime: new Date(from).toISOString(), endTime: new Date(to).toISOString(), buckets, totals }
  },
})

/** The start of the hour or UTC day of a time (epoch days and hours are UTC's). */
const bucketOf = (ms: number, size: number) => Math.floor(ms / size) * size

const countsOf = (b: VolumeCounts | VolumeBucket): VolumeCounts => ({
  accepted: b.accepted,
  delivered: b.delivered,
  deferred: b.deferred,
  failed: b.failed,
  refused: b.refused,
})
