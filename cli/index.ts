import { Command, Help, type Option } from 'commander'
import { PACKAGE } from '../package-info.js'
import { addAccountCommands } from './account.js'
import { addApprovalCommands } from './approvals.js'
import { addBackupCommand } from './backup.js'
import { addBlockCommands } from './blocks.js'
import { addDomainCommands } from './domains.js'
import { addInboxCommands } from './inbox.js'
import { addOrderCommands } from './order.js'
import { addQueueCommands } from './queue.js'
import { addServeCommands } from './serve.js'
import { addSinkCommand } from './sink.js'
import { addWebhookCommands } from './webhook.js'

/** The `mailroom` command: one module per subject adds its subcommands. */
export function buildCli(): Command {
  const program = new Command('mailroom')
    .description('A self-hosted mail relay: REST, MCP and SMTP submission in front of one durable sending pipeline.')
    .version(PACKAGE.version)
    // Inherited by every subcommand made from here on: a required option says so in its --help.
    .configureHelp({
      optionDescription(this: Help, option: Option) {
        const description = Help.prototype.optionDescription.call(this, option)
        return option.mandatory ? `${description} (required)` : description
      },
    })
  addServeCommands(program)
  addAccountCommands(program)
  addOrderCommands(program)
  addApprovalCommands(program)
  addBlockCommands(program)
  addDomainCommands(program)
  addInboxCommands(program)
  addQueueCommands(program)
  addWebhookCommands(program)
  addBackupCommand(program)
  addSinkCommand(program)
  oneLineErrors(program, 'mailroom')
  return program
}

/** A usage error as one line that names the command's --help, instead of the whole usage. */
function oneLineErrors(command: Command, path: string): void {
  command.configureOutput({
    outputError: (message, write) => write(`mailroom: ${message.trimEnd()} (see ${path} --help)\n`),
  })
  for (const sub of command.commands) oneLineErrors(sub, `${path} ${sub.name()}`)
}

export async function main(argv: string[]): Promise<void> {
  await buildCli().parseAsync(argv)
}
