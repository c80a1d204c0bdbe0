import { z } from 'zod'
import { webhookRecord } from './add-webhook.js'
import { accountOf, defineTool } from './define.js'
import { WebhookRecord } from './webhook-schemas.js'

export const getWebhooks = defineTool({
  name: 'getWebhooks',
  title: 'List webhooks',
  http: { method: 'GET', path: '/webhooks' },
  resultKey: 'webhooks',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's webhooks. `status` failing: its last post failed; disabled: it failed for 5 days " +
    'and gets no more events (delete it and add it again). The secret is not shown again.',
  input: z.object({}),
  output: z.array(WebhookRecord),
  handler: async (_input, ctx) => (await ctx.store.webhooks.list(accountOf(ctx))).map(webhookRecord),
})
