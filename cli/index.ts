import { Command } from 'commander'
import { PACKAGE } from '../runtime.js'
import { addAccountCommands } from './account.js'
import { addBlockCommands } from './blocks.js'
import { addOrderCommands } from './order.js'
import { addServeCommands } from './serve.js'

/** The `mailroom` command: one module per subject adds its subcommands. */
export function buildCli(): Command {
  const program = new Command('mailroom')
    .description('A self-hosted mail relay: REST, MCP and SMTP submission in front of one durable sending pipeline.')
    .version(PACKAGE.version)
    .showHelpAfterError()
  addServeCommands(program)
  addAccountCommands(program)
  addOrderCommands(program)
  addBlockCommands(program)
  return program
}

export async function main(argv: string[]): Promise<void> {
  await buildCli().parseAsync(argv)
}
