import { z } from 'zod'
import { MailroomError, notFound } from '../errors.js'
import { isDomain } from '../relay/addresses.js'
import { checkRecords, domainRecords, txtLookup } from '../relay/domain-check.js'
import { accountOf, defineTool } from './define.js'
import { DnsRecord } from './get-domains.js'

export const checkDomain = defineTool({
  name: 'checkDomain',
  title: "Check a sending domain's DNS records",
  http: { method: 'GET', path: '/domains/{domain}/check' },
  errors: [400, 404, 422],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  description:
    'Looks up the DNS records getDomains lists for a sending domain of the account and says of each whether ' +
    'it is `published` and `matches`; `ok` when all match.',
  input: z.object({
    domain: z
      .string()
      .trim()
      .toLowerCase()
      .transform((d) => d.replace(/\.$/, ''))
      .refine(isDomain, 'must be a domain name'),
  }),
  output: z.object({
    domain: z.string(),
    ok: z.boolean(),
    records: z.array(DnsRecord.extend({ published: z.boolean(), matches: z.boolean(), found: z.array(z.string()) })),
  }),
  handler: async ({ domain }, ctx) => {
    const keys = await ctx.store.domains.keys(domain)
    // Another account's domain is answered like one nobody has.
    if (!keys.length || keys[0].accountId !== accountOf(ctx))
      throw notFound(`domain: ${domain} is not a sending domain`)
    let records: Awaited<ReturnType<typeof checkRecords>>
    try {
      records = await checkRecords(
        domainRecords(keys, ctx.config.nodeName, ctx.config.inbound.returnPath),
        txtLookup(ctx.config.delivery.dnsServers),
      )
    } catch (err) {
      throw new MailroomError(422, `domain: the DNS lookup failed (${(err as NodeJS.ErrnoException).code}); try again`)
    }
    return { domain, ok: records.every((r) => r.matches), records }
  },
})
