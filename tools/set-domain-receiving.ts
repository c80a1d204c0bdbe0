import { z } from 'zod'
import { notFound } from '../errors.js'
import { accountOf, defineTool } from './define.js'

export const MxRecord = z.object({ type: z.literal('MX'), name: z.string(), value: z.string() })

/** The MX record a receiving domain publishes: this server, by MAILROOM_MX_HOSTNAME. */
export const mxRecord = (domain: string, mxHostname: string) => ({
  type: 'MX' as const,
  name: domain,
  value: `10 ${mxHostname}.`,
})

export const setDomainReceiving = defineTool({
  name: 'setDomainReceiving',
  title: 'Receive mail at a domain',
  http: { method: 'POST', path: '/domains/{domain}/receiving', bodyTypes: ['application/json'] },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Makes a sending domain of the account receive mail (or stop: `receiving` false) and returns the MX record ' +
    'to publish. `catchAll`: every address there is an inbox; else only those addInbox makes.',
  input: z.object({
    domain: z.string().min(1).max(253).describe('A domain of getDomains.'),
    receiving: z.boolean().default(true),
    catchAll: z.boolean().default(false),
  }),
  output: z.object({
    domain: z.string(),
    receiving: z.boolean(),
    catchAll: z.boolean(),
    mx: MxRecord,
    returnPathMx: MxRecord.optional().describe(
      'With a return path (MAILROOM_RETURN_PATH): the MX record of its domain, where late bounces and complaints come back.',
    ),
  }),
  handler: async ({ domain, receiving, catchAll }, ctx) => {
    const account = accountOf(ctx)
    const set = await ctx.store.inbound.setReceiving({
      accountId: account,
      domain,
      receiving,
      catchAll,
      now: ctx.clock(),
    })
    if (!set) throw notFound(`domain: ${domain} is not a sending domain of this account (getDomains)`)
    ctx.logger.info({ account, domain: set.domain, receiving, catchAll: set.catchAll }, 'set a domain receiving')
    const { mxHostname, returnPath } = ctx.config.inbound
    return {
      ...set,
      mx: mxRecord(set.domain, mxHostname),
      ...(returnPath ? { returnPathMx: mxRecord(`${returnPath}.${set.domain}`, mxHostname) } : {}),
    }
  },
})
