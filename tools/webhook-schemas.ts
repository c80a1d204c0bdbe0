import { z } from 'zod'
import { WEBHOOK_EVENT_TYPES } from '../storage/store.js'

// Schemas of the webhook tools: extensions beyond the hosted service's contract, kept short (every
// MCP client reads them in its tool list).

export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES)

export const WebhookRecord = z.object({
  id: z.number().int(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().nullable(),
  created: z.string().describe('YYYY-MM-DD HH:MM:SS UTC'),
  status: z.enum(['enabled', 'failing', 'disabled']),
  lastError: z.string().nullable().describe('Why the last failed post failed, and when.'),
})
