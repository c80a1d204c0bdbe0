import { z } from 'zod'
import { EVENT_WINDOW_MS, SUBJECT_THRESHOLD, SUBJECT_WINDOW_MS } from '../relay/spam-filter.js'
import { UNSUBSCRIBED } from '../relay/unsubscribe.js'
import type { BlockEvent } from '../storage/store.js'
import { accountOf, defineTool } from './define.js'
import { utcDate } from './common.js'
import { MailBlocks } from './schemas.js'

/** How far back each category looks (the contract's limits). */
export const BLOCK_WINDOWS = {
  local: EVENT_WINDOW_MS,
  mbtrap: EVENT_WINDOW_MS,
  subject: SUBJECT_WINDOW_MS,
  unsubscribed: EVENT_WINDOW_MS,
}
/** The most unsubscribes listed: getSuppressions pages through them all. */
const MAX_UNSUBSCRIBED = 1000

const toEntry = (e: BlockEvent) => ({
  date: utcDate(e.createdAt),
  from: e.envFrom,
  messageId: e.messageId,
  subject: e.subject,
  to: e.rcptTo,
})

export const getMailBlocks = defineTool({
  name: 'getMailBlocks',
  title: 'List spam-filter blocks',
  http: { method: 'GET', path: '/mail/blocks' },
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Lists what the spam filter stopped, newest first: `local` (mail to recipients on the local block list) ' +
    'and `mbtrap` (mail to trap addresses) of the last 5 days, `subject` (senders that repeated a spam-like ' +
    'subject over 4 times in 3 days); and `unsubscribed`, recipients who used the one-click unsubscribe link of ' +
    "bulk mail in the last 5 days. Use it when sends are refused as blocked; delistBlock takes an entry's `from` " +
    '(or `to`, for an unsubscribe).',
  input: z.object({}),
  output: MailBlocks,
  handler: async (_input, ctx) => {
    const accountId = accountOf(ctx)
    const now = ctx.clock()
    return {
      local: (await ctx.store.blocks.events(accountId, 'LOCAL_BL_RCPT', now - BLOCK_WINDOWS.local)).map(toEntry),
      mbtrap: (await ctx.store.blocks.events(accountId, 'MBTRAP', now - BLOCK_WINDOWS.mbtrap)).map(toEntry),
      subject: await ctx.store.blocks.subjectPairs(accountId, now - BLOCK_WINDOWS.subject, SUBJECT_THRESHOLD),
      unsubscribed: (
        await ctx.store.blocks.suppressedFor(
          accountId,
          UNSUBSCRIBED,
          now - BLOCK_WINDOWS.unsubscribed,
          MAX_UNSUBSCRIBED,
        )
      ).map((s) => ({ date: utcDate(s.createdAt), to: s.address, mailid: s.txid })),
    }
  },
})
