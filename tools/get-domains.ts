import { z } from 'zod'
import { domainRecords } from '../relay/domain-check.js'
import type { DkimKey } from '../storage/store.js'
import { utcDateTime } from './common.js'
import { accountOf, defineTool } from './define.js'

export const DnsRecord = z.object({ type: z.literal('TXT'), name: z.string(), value: z.string() })

export const getDomains = defineTool({
  name: 'getDomains',
  title: 'List sending domains',
  http: { method: 'GET', path: '/domains' },
  resultKey: 'domains',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    "Lists the account's sending domains (mail from them is DKIM-signed), their keys (the oldest signs) and " +
    'the DNS records to publish for them; checkDomain says which are published.',
  input: z.object({}),
  output: z.array(
    z.object({
      domain: z.string(),
      keys: z.array(
        z.object({ selector: z.string(), algorithm: z.string(), signing: z.boolean(), created: z.string() }),
      ),
      records: z.array(DnsRecord),
    }),
  ),
  handler: async (_input, ctx) => {
    const byDomain = new Map<string, DkimKey[]>()
    for (const key of await ctx.store.domains.list(accountOf(ctx)))
      byDomain.set(key.domain, [...(byDomain.get(key.domain) ?? []), key])
    return [...byDomain].map(([domain, keys]) => ({
      domain,
      keys: keys.map((k, i) => ({
        selector: k.selector,
        algorithm: k.algorithm,
        signing: i === 0,
        created: utcDateTime(k.createdAt),
      })),
      records: domainRecords(keys, ctx.config.nodeName, ctx.config.inbound.returnPath),
    }))
  },
})
