import type { Command } from 'commander'
import { accountAction, accountOption, asAccount, positiveInt } from './common.js'

interface InboxRow {
  id: number
  address: string
  created: string
  messages: number
  unread: number
  storedBytes: number
}

/** `inbox`: an account's inboxes (the addInbox, getInboxes and deleteInbox tools). */
export function addInboxCommands(program: Command): void {
  const inbox = program
    .command('inbox')
    .description("Manage an account's inboxes: addresses at its receiving domains whose mail is kept")
  accountAction(
    inbox
      .command('add')
      .description('Add an inbox at a receiving domain of the account (mailroom domain receive)')
      .addOption(accountOption())
      .argument('<address>', 'the address, e.g. support@acme.example'),
    (rt, o, address: string) =>
      asAccount<InboxRow>(rt, o.account, () => import('../tools/add-inbox.js').then((m) => m.addInbox), { address }),
    (r) => `inbox ${r.id} added: ${r.address}`,
  )
  accountAction(
    inbox.command('list').description("List an account's inboxes").addOption(accountOption()),
    (rt, o) =>
      asAccount<InboxRow[]>(rt, o.account, () => import('../tools/get-inboxes.js').then((m) => m.getInboxes), {}),
    (rows) =>
      rows
        .map((r) => `${r.id}\t${r.address}\t${r.messages} messages\t${r.unread} unread\t${r.storedBytes} bytes`)
        .join('\n') || 'no inboxes',
  )
  accountAction(
    inbox
      .command('remove')
      .description('Delete an inbox and the messages it holds; its address then refuses mail')
      .addOption(accountOption())
      .argument('<id>', 'inbox id', positiveInt('id')),
    async (rt, o, id: number) => {
      await asAccount(rt, o.account, () => import('../tools/delete-inbox.js').then((m) => m.deleteInbox), { id })
      return { id, deleted: true }
    },
    (r) => `inbox ${r.id} deleted`,
  )
}
