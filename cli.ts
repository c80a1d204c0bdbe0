import { Command, InvalidArgumentError, Option } from 'commander'
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { loadConfig } from './config.js'
import { isDomain, isEmail } from './relay/addresses.js'
import { createAccount, createLogger, createOrder, openRuntime, PACKAGE, type Runtime } from './runtime.js'
import type { MailOrder } from './storage/store.js'

const positiveInt = (name: string) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`${name} must be a positive integer`)
  return Number(value)
}

const senderPattern = (value: string) => {
  const v = value.trim().toLowerCase()
  if (v.startsWith('@') ? !isDomain(v.slice(1)) : !isEmail(v)) throw new InvalidArgumentError(`"${value}" is not an address or @domain`)
  return v
}

const collect = (value: string, previous: string[]) => [...previous, senderPattern(value)]

const orderJson = (o: MailOrder) => ({ id: o.id, username: `mb${o.id}`, status: o.status, comment: o.comment, senders: o.senders })

/**
 * Runs an admin action against the data directory, printing JSON or text. Only a command that
 * creates something of its own (`create`: an account, a trap) may start a new data directory;
 * any other refuses one without a database instead of answering from a new, empty one.
 */
async function withRuntime<T>(json: boolean, action: (rt: Runtime) => Promise<T>, text: (result: T) => string, options: { create?: boolean } = {}): Promise<void> {
  const config = loadConfig()
  // Admin commands keep stdout for their own output.
  const rt = openRuntime(config, { logger: createLogger({ logLevel: json ? 'silent' : 'warn' }, 2), existing: !options.create })
  try {
    const result = await action(rt)
    process.stdout.write(json ? JSON.stringify(result) + '\n' : text(result) + '\n')
  } finally {
    await rt.close()
  }
}

async function ownedOrder(rt: Runtime, id: number): Promise<MailOrder> {
  const order = await rt.store.orders.get(id)
  if (!order) throw new Error(`no mail order ${id}`)
  return order
}

async function existingAccount(rt: Runtime, id: number): Promise<void> {
  if (!(await rt.store.accounts.get(id))) throw new Error(`no account ${id}`)
}

export function buildCli(): Command {
  const program = new Command('mailroom')
    .description('A self-hosted mail relay: REST, MCP and SMTP submission in front of one durable sending pipeline.')
    .version(PACKAGE.version)
    .showHelpAfterError()
  const json = () => new Option('--json', 'print JSON for scripts')

  program
    .command('serve')
    .description('Run the service: REST and MCP on MAILROOM_HTTP_PORT, SMTP submission on MAILROOM_SMTP_PORT, and delivery')
    .action(async () => {
      const { startServer } = await import('./serve.js')
      const running = await startServer(loadConfig())
      if (running.firstStart) process.stdout.write(running.firstStart + '\n')
      const stop = () => void running.stop().then(() => process.exit(0))
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })

  program
    .command('stdio')
    .description('Serve the tools over MCP on stdin/stdout for a desktop assistant, as the account of MAILROOM_API_KEY')
    .option('--url <url>', 'act as a client of a remote mailroom at this address instead of the local data directory')
    .action(async (o) => {
      const config = loadConfig()
      // The doors are loaded only by the commands that open them: admin commands start fast.
      const { serveStdioLocal, serveStdioRemote } = await import('./transports/stdio.js')
      if (o.url) {
        await serveStdioRemote(o.url, config.apiKey)
        return
      }
      await serveStdioLocal(openRuntime(config, { logger: createLogger(config, 2), existing: true }), config.apiKey)
    })

  const account = program.command('account').description('Manage accounts and their API keys')
  account
    .command('create')
    .description('Create an account and its first API key (shown once)')
    .option('--name <name>', 'account name', 'account')
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          const { account, apiKey } = await createAccount(rt, o.name)
          return { id: account.id, apiKey }
        },
        (r) => `account ${r.id} created\nAPI key (shown once): ${r.apiKey}`,
        { create: true },
      ),
    )
  account
    .command('list')
    .description('List accounts')
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => (await rt.store.accounts.list()).map((a) => ({ id: a.id, name: a.name, currency: a.currency, billingDay: a.billingDay })),
        (rows) => rows.map((a) => `${a.id}\t${a.name}`).join('\n') || 'no accounts',
      ),
    )
  const key = account.command('key').description('Create, list and revoke API keys')
  key
    .command('create')
    .description('Create another API key for an account (shown once)')
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          const { info, key } = await rt.store.apiKeys.create(o.account, rt.clock())
          return { id: info.id, account: o.account, apiKey: key }
        },
        (r) => `key ${r.id} created for account ${r.account}\nAPI key (shown once): ${r.apiKey}`,
      ),
    )
  key
    .command('list')
    .description("List an account's keys (prefixes only)")
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          return (await rt.store.apiKeys.list(o.account)).map((k) => ({ id: k.id, prefix: k.prefix, revoked: k.revokedAt !== null }))
        },
        (rows) => rows.map((k) => `${k.id}\t${k.prefix}…\t${k.revoked ? 'revoked' : 'active'}`).join('\n') || 'no keys',
      ),
    )
  key
    .command('revoke')
    .description('Revoke a key by its id or its prefix (from `key list`)')
    .argument('<key>', 'key id or prefix')
    .addOption(json())
    .action((k: string, o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          // The prefix as `key list` prints it, with its ellipsis, is taken too.
          const given = k.replace(/(…|\.\.\.)$/, '')
          const revoked = await rt.store.apiKeys.revoke(/^\d+$/.test(given) ? Number(given) : given, rt.clock())
          if (!revoked) throw new Error(`no active key ${k}`)
          return { revoked: k }
        },
        (r) => `key ${r.revoked} revoked`,
      ),
    )

  const order = program.command('order').description('Manage mail orders (sending credentials)')
  order
    .command('create')
    .description('Create an active mail order; prints its SMTP username and password')
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .option('--comment <text>', 'a note shown in listings')
    .option('--sender <addr|@domain>', 'authorized sender (repeatable); none = any sender', collect, [])
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          const { order, password } = await createOrder(rt, o.account, o.comment ?? null, o.sender)
          return { id: order.id, username: `mb${order.id}`, password, status: order.status }
        },
        (r) => `mail order ${r.id} created\nSMTP username: ${r.username}\nSMTP password: ${r.password}`,
      ),
    )
  order
    .command('cancel')
    .description('Cancel a mail order: it can no longer send; its history stays')
    .argument('<id>', 'mail order id', positiveInt('id'))
    .addOption(json())
    .action((id: number, o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await ownedOrder(rt, id)
          await rt.store.orders.setStatus(id, 'canceled')
          return { id, status: 'canceled' }
        },
        (r) => `mail order ${r.id} canceled`,
      ),
    )
  order
    .command('list')
    .description("List an account's mail orders")
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          return (await rt.store.orders.list(o.account)).map(orderJson)
        },
        (rows) => rows.map((r) => `${r.id}\t${r.username}\t${r.status}\t${r.senders.join(',') || '(any sender)'}\t${r.comment ?? ''}`).join('\n') || 'no orders',
      ),
    )

  const sender = program.command('sender').description("Manage a mail order's authorized senders")
  for (const [name, description] of [
    ['allow', 'Authorize a sender address or @domain for an order'],
    ['revoke', 'Remove an authorized sender from an order'],
  ] as const) {
    sender
      .command(name)
      .description(description)
      .requiredOption('--order <id>', 'mail order id', positiveInt('--order'))
      .argument('<sender>', 'address or @domain', senderPattern)
      .addOption(json())
      .action((pattern: string, o) =>
        withRuntime(
          !!o.json,
          async (rt) => {
            await ownedOrder(rt, o.order)
            const changed = name === 'allow' ? await rt.store.orders.addSender(o.order, pattern) : await rt.store.orders.removeSender(o.order, pattern)
            if (name === 'revoke' && !changed) throw new Error(`${pattern} is not an authorized sender of order ${o.order}`)
            return orderJson(await ownedOrder(rt, o.order))
          },
          (r) => `order ${r.id} senders: ${r.senders.join(', ') || '(any sender)'}`,
        ),
      )
  }
  const trap = program.command('trap').description('Manage the spam traps of every account: mail to a trap is refused and blocks its sender')
  trap
    .command('add')
    .description('Add a trap address or @domain')
    .argument('<trap>', 'address or @domain', senderPattern)
    .addOption(json())
    .action((pattern: string, o) =>
      withRuntime(
        !!o.json,
        async (rt) => ({ trap: pattern, added: await rt.store.traps.add(pattern, rt.clock()) }),
        (r) => (r.added ? `trap ${r.trap} added` : `${r.trap} was already a trap`),
        { create: true },
      ),
    )
  trap
    .command('remove')
    .description('Remove a trap')
    .argument('<trap>', 'address or @domain', senderPattern)
    .addOption(json())
    .action((pattern: string, o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          if (!(await rt.store.traps.remove(pattern))) throw new Error(`${pattern} is not a trap`)
          return { trap: pattern, removed: true }
        },
        (r) => `trap ${r.trap} removed`,
      ),
    )
  trap
    .command('list')
    .description('List the traps')
    .addOption(json())
    .action((o) => withRuntime(!!o.json, (rt) => rt.store.traps.list(), (rows) => rows.join('\n') || 'no traps'))

  program
    .command('blocklist')
    .description("Manage an account's external block list (senders from a third-party feed)")
    .command('import')
    .description('Import sender addresses, one per line (blank lines and # comments are skipped)')
    .argument('<file>', 'the file to import')
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .addOption(json())
    .action((file: string, o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          const lines = readFileSync(file, 'utf8').split(/\r?\n/).map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
          const invalid = lines.filter((l) => !isEmail(l))
          const valid = lines.filter((l) => isEmail(l))
          for (const address of valid) {
            await rt.store.blocks.addToList({ accountId: o.account, source: 'external', kind: 'sender', address, reason: `imported from ${basename(file)}`, now: rt.clock() })
          }
          return { account: o.account, imported: valid.length, skipped: invalid }
        },
        (r) => `${r.imported} addresses imported for account ${r.account}` + (r.skipped.length ? `; skipped (not addresses): ${r.skipped.join(', ')}` : ''),
      ),
    )

  const suppress = program.command('suppress').description("Manage an account's local block list: recipients mail is never sent to")
  for (const [name, description] of [
    ['add', 'Suppress a recipient address'],
    ['remove', 'Lift the suppression of a recipient address'],
  ] as const) {
    suppress
      .command(name)
      .description(description)
      .requiredOption('--account <id>', 'account id', positiveInt('--account'))
      .argument('<address>', 'recipient address', (v: string) => {
        if (!isEmail(v)) throw new InvalidArgumentError(`"${v}" is not an address`)
        return v.toLowerCase()
      })
      .addOption(json())
      .action((address: string, o) =>
        withRuntime(
          !!o.json,
          async (rt) => {
            await existingAccount(rt, o.account)
            if (name === 'add') {
              await rt.store.blocks.addToList({ accountId: o.account, source: 'internal', kind: 'recipient', address, reason: 'suppressed by the operator', now: rt.clock() })
            } else if (!(await rt.store.blocks.removeFromList(o.account, address, 'recipient'))) {
              throw new Error(`${address} is not suppressed for account ${o.account}`)
            }
            return { account: o.account, address, suppressed: name === 'add' }
          },
          (r) => `${r.address} ${r.suppressed ? 'suppressed' : 'no longer suppressed'} for account ${r.account}`,
        ),
      )
  }
  suppress
    .command('list')
    .description("List an account's suppressed recipients")
    .requiredOption('--account <id>', 'account id', positiveInt('--account'))
    .addOption(json())
    .action((o) =>
      withRuntime(
        !!o.json,
        async (rt) => {
          await existingAccount(rt, o.account)
          return (await rt.store.blocks.listEntries(o.account, 'recipient')).map((e) => ({ address: e.address, reason: e.reason, since: new Date(e.createdAt).toISOString() }))
        },
        (rows) => rows.map((r) => `${r.address}\t${r.since}\t${r.reason}`).join('\n') || 'no suppressed recipients',
      ),
    )
  return program
}

export async function main(argv: string[]): Promise<void> {
  await buildCli().parseAsync(argv)
}
