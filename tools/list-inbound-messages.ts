import { z } from 'zod'
import { badInput } from '../errors.js'
import { accountOf, defineTool } from './define.js'
import { InboundSummaryRecord, summaryRecord } from './inbound-schemas.js'
import { DateOrTimestamp } from './schemas.js'
import { toEpochSeconds } from './view-mail-log.js'

/** A flag given as JSON (true) or in a query string ("true"). */
export const Flag = z.union([z.boolean(), z.enum(['true', 'false'])]).transform((v) => v === true || v === 'true')

export const listInboundMessages = defineTool({
  name: 'listInboundMessages',
  title: 'List received messages',
  http: { method: 'GET', path: '/inbound' },
  errors: [400],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's received messages, newest first, with their summaries; filter by inbox, sender, thread, " +
    'time or unread. getInboundMessage reads one.',
  input: z.object({
    inbox: z
      .union([z.number().int().min(1), z.string().min(3).max(254)])
      .optional()
      .describe('Inbox id or address.'),
    from: z.string().min(3).max(254).optional().describe('Sender address (From).'),
    threadId: z.string().min(1).max(64).optional(),
    since: DateOrTimestamp.optional().describe('Received at or after, as viewMailLog takes dates.'),
    until: DateOrTimestamp.optional().describe('Received at or before, as since.'),
    unread: Flag.default(false).describe('Unread ones only.'),
    skip: z.number().int().min(0).max(2_147_483_647).default(0),
    limit: z.number().int().min(1).max(1000).default(50),
  }),
  output: z.object({
    total: z.number().int(),
    skip: z.number().int(),
    limit: z.number().int(),
    messages: z.array(InboundSummaryRecord),
  }),
  handler: async (input, ctx) => {
    const now = ctx.clock()
    const since = input.since === undefined ? undefined : toEpochSeconds('since', input.since, 'start', now) * 1000
    // `until` is inclusive to its second, as viewMailLog's endDate.
    const until = input.until === undefined ? undefined : (toEpochSeconds('until', input.until, 'end', now) + 1) * 1000
    if (since !== undefined && until !== undefined && since >= until) throw badInput('since: after until')
    const { inbox, skip, limit } = input
    const { total, rows } = await ctx.store.inbound.list({
      accountId: accountOf(ctx),
      ...(typeof inbox === 'number' ? { inboxId: inbox } : inbox === undefined ? {} : { inbox }),
      from: input.from,
      threadId: input.threadId,
      since,
      until,
      unread: input.unread,
      skip,
      limit,
    })
    return { total, skip, limit, messages: rows.map(summaryRecord) }
  },
})
