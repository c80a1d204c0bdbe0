import { z } from 'zod'
import { MailroomError } from '../errors.js'
import type { ApiKeyInfo } from '../storage/store.js'
import { policyRecord, SendPolicyOut } from './approval-schemas.js'
import { utcDateTime } from './common.js'
import { accountOf, defineTool, type ToolContext } from './define.js'

export const ApiKey = z.object({
  id: z.number().int(),
  prefix: z.string().describe('The start of the key, to tell keys apart.'),
  sandbox: z.boolean(),
  created: z.string(),
  revoked: z.string().nullable(),
  policy: SendPolicyOut.nullable().describe(
    'Its send policy (getSendPolicy, docs/approval.md); null: none, its sends go as is.',
  ),
})

export const apiKeyRecord = (k: ApiKeyInfo): z.input<typeof ApiKey> => ({
  id: k.id,
  prefix: k.prefix,
  sandbox: k.sandbox,
  created: utcDateTime(k.createdAt),
  revoked: k.revokedAt === null ? null : utcDateTime(k.revokedAt),
  policy: k.policy ? policyRecord(k.policy) : null,
})

/**
 * Keys are made and revoked with a key: an access token may not mint one (it would outlive the
 * token and its scopes), nor revoke the one it was granted from.
 */
export function refuseAccessToken(ctx: ToolContext, what: string): void {
  if (ctx.scopes) throw new MailroomError(403, `${what}: API keys are managed with an API key, not an access token`)
}

export const getApiKeys = defineTool({
  name: 'getApiKeys',
  title: 'List API keys',
  http: { method: 'GET', path: '/keys' },
  resultKey: 'keys',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's API keys, revoked ones too, by prefix (a key is shown only when created), each with its send policy.",
  input: z.object({}),
  output: z.array(ApiKey),
  handler: async (_input, ctx) => (await ctx.store.apiKeys.list(accountOf(ctx))).map(apiKeyRecord),
})
