import { InvalidArgumentError, type Command } from 'commander'
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { canonicalAddress, isEmail } from '../relay/addresses.js'
import { accountAction, accountOption, adminAction, senderPattern } from './common.js'

const recipientAddress = (v: string) => {
  if (!isEmail(v)) throw new InvalidArgumentError(`"${v}" is not an address`)
  return canonicalAddress(v).toLowerCase()
}

/** `trap`, `blocklist` and `suppress`: what the spam filter refuses. */
export function addBlockCommands(program: Command): void {
  const trap = program
    .command('trap')
    .description('Manage the spam traps of every account: mail to a trap is refused and blocks its sender')
  adminAction(
    trap
      .command('add')
      .description('Add a trap address or @domain')
      .argument('<trap>', 'address or @domain', senderPattern),
    async (rt, _o, pattern: string) => ({ trap: pattern, added: await rt.store.traps.add(pattern, rt.clock()) }),
    (r) => (r.added ? `trap ${r.trap} added` : `${r.trap} was already a trap`),
    { create: true },
  )
  adminAction(
    trap.command('remove').description('Remove a trap').argument('<trap>', 'address or @domain', senderPattern),
    async (rt, _o, pattern: string) => {
      if (!(await rt.store.traps.remove(pattern))) throw new Error(`${pattern} is not a trap`)
      return { trap: pattern, removed: true }
    },
    (r) => `trap ${r.trap} removed`,
  )
  adminAction(
    trap.command('list').description('List the traps'),
    (rt) => rt.store.traps.list(),
    (rows) => rows.join('\n') || 'no traps',
  )

  accountAction(
    program
      .command('blocklist')
      .description("Manage an account's external block list (senders from a third-party feed)")
      .command('import')
      .description('Import sender addresses, one per line (blank lines and # comments are skipped)')
      .argument('<file>', 'the file to import')
      .addOption(accountOption()),
    async (rt, o, file: string) => {
      const lines = readFileSync(file, 'utf8')
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
      const invalid = lines.filter((l) => !isEmail(l))
      const valid = lines.filter((l) => isEmail(l)).map(canonicalAddress)
      for (const address of valid) {
        await rt.store.blocks.addToList({
          accountId: o.account,
          source: 'external',
          kind: 'sender',
          address,
          reason: `imported from ${basename(file)}`,
          now: rt.clock(),
        })
      }
      return { account: o.account as number, imported: valid.length, skipped: invalid }
    },
    (r) =>
      `${r.imported} addresses imported for account ${r.account}${r.skipped.length ? `; skipped (not addresses): ${r.skipped.join(', ')}` : ''}`,
  )

  const suppress = program
    .command('suppress')
    .description("Manage an account's local block list: recipients mail is never sent to")
  for (const [name, description] of [
    ['add', 'Suppress a recipient address'],
    ['remove', 'Lift the suppression of a recipient address'],
  ] as const) {
    accountAction(
      suppress
        .command(name)
        .description(description)
        .addOption(accountOption())
        .argument('<address>', 'recipient address', recipientAddress),
      async (rt, o, address: string) => {
        if (name === 'add') {
          await rt.store.blocks.addToList({
            accountId: o.account,
            source: 'internal',
            kind: 'recipient',
            address,
            reason: 'suppressed by the operator',
            now: rt.clock(),
          })
        } else if (!(await rt.store.blocks.removeFromList(o.account, address, 'recipient'))) {
          throw new Error(`${address} is not suppressed for account ${o.account}`)
        }
        return { account: o.account as number, address, suppressed: name === 'add' }
      },
      (r) => `${r.address} ${r.suppressed ? 'suppressed' : 'no longer suppressed'} for account ${r.account}`,
    )
  }
  accountAction(
    suppress.command('list').description("List an account's suppressed recipients").addOption(accountOption()),
    async (rt, o) =>
      (await rt.store.blocks.listEntries(o.account, 'recipient')).map((e) => ({
        address: e.address,
        reason: e.reason,
        since: new Date(e.createdAt).toISOString(),
      })),
    (rows) => rows.map((r) => `${r.address}\t${r.since}\t${r.reason}`).join('\n') || 'no suppressed recipients',
  )
}
