import type { Command } from 'commander'
import { createAccount } from '../accounts.js'
import { accountAction, accountOption, adminAction, positiveInt } from './common.js'
import { addPolicyCommand } from './policy.js'

/** `account` and `account key`: accounts and their API keys. */
export function addAccountCommands(program: Command): void {
  const account = program.command('account').description('Manage accounts and their API keys')
  adminAction(
    account
      .command('create')
      .description('Create an account and its first API key (shown once)')
      .option('--name <name>', 'account name', 'account'),
    async (rt, o) => {
      const { account, apiKey } = await createAccount(rt, o.name)
      return { id: account.id, apiKey }
    },
    (r) => `account ${r.id} created\nAPI key (shown once): ${r.apiKey}`,
    { create: true },
  )
  adminAction(
    account.command('list').description('List accounts'),
    async (rt) =>
      (await rt.store.accounts.list()).map((a) => ({
        id: a.id,
        name: a.name,
        currency: a.currency,
        billingDay: a.billingDay,
      })),
    (rows) => rows.map((a) => `${a.id}\t${a.name}`).join('\n') || 'no accounts',
  )

  const key = account.command('key').description('Create, list and revoke API keys')
  accountAction(
    key
      .command('create')
      .description('Create another API key for an account (shown once)')
      .addOption(accountOption())
      .option('--sandbox', 'a sandbox key: its mail goes through everything and is logged, but never leaves'),
    async (rt, o) => {
      const sandbox = o.sandbox === true
      const { info, key } = await rt.store.apiKeys.create(o.account, rt.clock(), { sandbox })
      return { id: info.id, account: o.account as number, apiKey: key, sandbox }
    },
    (r) =>
      `${r.sandbox ? 'sandbox key' : 'key'} ${r.id} created for account ${r.account}\nAPI key (shown once): ${r.apiKey}`,
  )
  accountAction(
    key.command('list').description("List an account's keys (prefixes only)").addOption(accountOption()),
    async (rt, o) =>
      (await rt.store.apiKeys.list(o.account)).map((k) => ({
        id: k.id,
        prefix: k.prefix,
        revoked: k.revokedAt !== null,
        sandbox: k.sandbox,
      })),
    (rows) =>
      rows
        .map((k) => `${k.id}\t${k.prefix}…\t${k.revoked ? 'revoked' : 'active'}${k.sandbox ? '\tsandbox' : ''}`)
        .join('\n') || 'no keys',
  )
  adminAction(
    key
      .command('revoke')
      .description('Revoke a key by its id or its prefix (from `key list`)')
      .argument('<key>', 'key id or prefix'),
    async (rt, _o, k: string) => {
      // The prefix as `key list` prints it, with its ellipsis, is taken too.
      const given = k.replace(/(…|\.\.\.)$/, '')
      const revoked = await rt.store.apiKeys.revoke(/^\d+$/.test(given) ? Number(given) : given, rt.clock())
      if (!revoked) throw new Error(`no active key ${k}`)
      return { revoked: k }
    },
    (r) => `key ${r.revoked} revoked`,
  )
  addPolicyCommand(
    key,
    "Print or set a key's send policy (docs/approval.md): what its sends may do alone, and what waits for a person",
    ['<key>', 'key id or prefix'],
    async (rt, k) => {
      const given = k.replace(/(…|\.\.\.)$/, '')
      if (/^\d+$/.test(given)) return { kind: 'key', id: Number(given) }
      for (const account of await rt.store.accounts.list()) {
        const found = (await rt.store.apiKeys.list(account.id)).find((info) => info.prefix === given)
        if (found) return { kind: 'key', id: found.id }
      }
      throw new Error(`no key ${k}`)
    },
  )

  // OAuth grants: what a person allowed an application to do for the account (docs/oauth.md).
  accountAction(
    account
      .command('grants')
      .description('List the OAuth grants of an account: the applications it allowed, and what they may do')
      .addOption(accountOption()),
    async (rt, o) =>
      (await rt.store.oauth.grants(o.account)).map((g) => ({
        id: g.id,
        client: g.clientName,
        clientId: g.clientId,
        scopes: g.scopes,
        resource: g.resource,
        sandbox: g.sandbox,
        createdAt: new Date(g.createdAt).toISOString(),
        refreshedAt: new Date(g.refreshedAt).toISOString(),
      })),
    (rows) =>
      rows
        .map(
          (g) =>
            `${g.id}\t${g.client ?? g.clientId}\t${g.scopes.join(' ')}\t${g.resource}\tlast used ${g.refreshedAt}${g.sandbox ? '\tsandbox' : ''}`,
        )
        .join('\n') || 'no grants',
  )
  const grant = account.command('grant').description('Revoke OAuth grants, or set their send policy')
  adminAction(
    grant
      .command('revoke')
      .description('Revoke an OAuth grant (from `account grants`): its tokens stop working at their next request')
      .argument('<id>', 'grant id', positiveInt('the grant id')),
    async (rt, _o, id: number) => {
      if (!(await rt.store.oauth.revoke(id))) throw new Error(`no grant ${id}`)
      return { revoked: id }
    },
    (r) => `grant ${r.revoked} revoked`,
  )
  addPolicyCommand(
    grant,
    "Print or set an OAuth grant's send policy (from `account grants`); a grant starts with its key's",
    ['<id>', 'grant id'],
    async (_rt, id) => ({ kind: 'grant', id: positiveInt('the grant id')(id) }),
  )
}
