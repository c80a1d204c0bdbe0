import { z } from 'zod'
import { badInput, notFound } from '../errors.js'
import { canonicalAddress, isDomain, isEmail } from '../relay/addresses.js'
import type { RuleType as RuleTypeName } from '../storage/store.js'
import { defineTool, JSON_AND_FORM } from './define.js'
import { activeOrders, ok, resolveOrder } from './common.js'
import { GenericResponse, RuleType, Username } from './schemas.js'

/** How `data` must look for each rule type. */
export const RULE_DATA: Record<RuleTypeName, { valid: (s: string) => boolean; expected: string }> = {
  email: { valid: isEmail, expected: 'a full email address' },
  destination: { valid: isEmail, expected: 'a full email address' },
  domain: { valid: isDomain, expected: 'a domain name such as example.com' },
  startswith: { valid: (s) => /^[A-Za-z0-9+_.-]+$/.test(s), expected: 'a prefix of letters, digits, +, _, . or -' },
}

export const addRule = defineTool({
  name: 'addRule',
  title: 'Create a deny rule',
  http: { method: 'POST', path: '/mail/rules', bodyTypes: JSON_AND_FORM },
  errors: [400, 404],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Creates a deny rule: mail it matches is refused before it is queued. `data` is, by `type`: `email` a ' +
    "sender address, `domain` a sender domain, `startswith` a prefix of senders' local part (letters, digits, " +
    "+ _ . -), `destination` a recipient address; any case. Returns `text`: the rule id (deleteRule's " +
    '`ruleId`), also for an existing rule.',
  input: z.object({
    type: RuleType.describe('What data is.'),
    // An address is at most 254 characters (RFC 5321 §4.5.3.1.3 with its angle brackets), a domain 253.
    data: z.string().trim().min(1).max(254).describe('The value to match.'),
    user: Username.optional().describe('Mail order, mb<id>; default: the first active one.'),
    username: Username.optional().describe('Alias of user.'),
  }),
  output: GenericResponse,
  handler: async (input, ctx) => {
    const rule = RULE_DATA[input.type]
    if (!rule.valid(input.data)) throw badInput(`data: "${input.data}" is not ${rule.expected} (type ${input.type})`)
    if (input.user && input.username && input.user !== input.username)
      throw badInput('user: user and username name different orders')
    const user = input.user ?? input.username
    let orderId: number
    if (user) {
      const order = (await activeOrders(ctx)).find((o) => `mb${o.id}` === user)
      if (!order) throw notFound(`user: ${user} is not an active mail order of this account`)
      orderId = order.id
    } else {
      orderId = (await resolveOrder(ctx, undefined)).id
    }
    // An address is kept as every door keeps it (canonicalAddress), or a rule on `"b\ob"@x.com` would never match.
    const data = input.type === 'email' || input.type === 'destination' ? canonicalAddress(input.data) : input.data
    const created = await ctx.store.rules.create({ orderId, type: input.type, data, now: ctx.clock() })
    return ok(String(created.id))
  },
})
