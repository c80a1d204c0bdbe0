import type { Account, MailOrder } from './storage/store.js'
import type { Services } from './tools/define.js'

/** What making an account or an order takes: the admin commands have no more. */
type Maker = Pick<Services, 'store' | 'config' | 'clock'>

/** A new account's fields: the configured prices, and cycles from the day it was made. */
function newAccount(services: Maker, name: string): Omit<Account, 'id'> {
  const now = services.clock()
  const { pricing } = services.config
  return {
    name,
    currency: pricing.currency,
    priceBase: pricing.base,
    pricePerMessage: pricing.perMessage,
    // Cycles start on the day the account was made; days past the 28th would skip short months.
    billingDay: Math.min(new Date(now).getUTCDate(), 28),
    createdAt: now,
  }
}

/** A new account with one API key; the key is returned in full only here. */
export async function createAccount(services: Maker, name: string): Promise<{ account: Account; apiKey: string }> {
  const account = await services.store.accounts.create(newAccount(services, name))
  const { key } = await services.store.apiKeys.create(account.id, account.createdAt)
  return { account, apiKey: key }
}

/** A new active mail order; with `sandbox`, everything sent with it is sandbox mail (relay/sandbox.ts). */
export async function createOrder(
  services: Maker,
  accountId: number,
  comment: string | null,
  senders: string[],
  options: { sandbox?: boolean; list?: boolean } = {},
): Promise<{ order: MailOrder; password: string }> {
  return services.store.orders.create({ accountId, comment, senders, now: services.clock(), ...options })
}

/**
 * On the first start with an empty database: an account with one active mail order, so the
 * service can be used at once. Returns what must be shown to the operator, once. Nodes that start
 * at once on one empty database make one account between them (the store's createFirst).
 */
export async function bootstrap(
  services: Services,
): Promise<{ apiKey: string; order: MailOrder; password: string } | null> {
  // Every start but the first is answered without the transaction.
  if ((await services.store.accounts.list()).length > 0) return null
  const first = await services.store.accounts.createFirst({
    account: newAccount(services, 'default'),
    orderComment: 'created on first start',
  })
  if (!first) return null
  const { account, apiKey, order, password } = first
  services.logger.info({ account: account.id, order: order.id }, 'first start: created the default account')
  return { apiKey, order, password }
}
