import { InvalidArgumentError, Option, type Command, type OptionValues } from 'commander'
import { senderPatternOf } from '../relay/addresses.js'
import type { MailOrder } from '../storage/store.js'
import { MailroomError } from '../errors.js'
import type { AnyTool, Services } from '../tools/define.js'

/**
 * What the admin commands share: argument parsers, the data directory's store, printing. A
 * command's modules are loaded by its action, not here: `mailroom --help` loads commander and the
 * command definitions only, and an admin command the configuration and the store only.
 */

/** What an admin command works with: the data directory's store, the configuration, the clock. */
export type Admin = Pick<Services, 'store' | 'config' | 'clock'>

export const positiveInt = (name: string) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError(`${name} must be a positive integer`)
  return Number(value)
}

export const senderPattern = (value: string) => {
  const pattern = senderPatternOf(value)
  if (pattern === undefined) throw new InvalidArgumentError(`"${value}" is not an address or @domain`)
  return pattern
}

/** `--account <id>`, required. */
export const accountOption = () =>
  new Option('--account <id>', 'account id').argParser(positiveInt('--account')).makeOptionMandatory()

/**
 * Runs an admin action against the data directory, printing JSON or text. Only a command that
 * creates something of its own (`create`: an account, a trap) may start a new data directory;
 * any other refuses one without a database instead of answering from a new, empty one.
 */
export async function withStore<T>(
  json: boolean,
  action: (rt: Admin) => Promise<T>,
  text: (result: T) => string,
  options: { create?: boolean } = {},
): Promise<void> {
  const [{ loadConfig }, { openStore }] = await Promise.all([import('../config.js'), import('../storage/index.js')])
  const config = loadConfig()
  const store = await openStore(config, { existing: !options.create })
  try {
    const result = await action({ store, config, clock: Date.now })
    // Admin commands keep stdout for their own output.
    process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${text(result)}\n`)
  } finally {
    await store.close()
  }
}

// Commander hands an action its arguments, already parsed, in the order they were declared.
// biome-ignore lint/suspicious/noExplicitAny: each command declares its own arguments
type Action<T> = (rt: Admin, options: OptionValues, ...args: any[]) => Promise<T>

/**
 * Makes `command` an admin command: it takes `--json`, and runs `action` on the data directory
 * with its options and arguments, printing the result as JSON or as `text` writes it.
 */
export function adminAction<T>(
  command: Command,
  action: Action<T>,
  text: (result: T) => string,
  options: { create?: boolean } = {},
): Command {
  return command.option('--json', 'print JSON for scripts').action((...params: unknown[]) => {
    const self = params[params.length - 1] as Command
    const o = self.opts()
    return withStore(!!o.json, (rt) => action(rt, o, ...self.processedArgs), text, options)
  })
}

/** adminAction for a command with `--account`: an account given that does not exist is refused first. */
export function accountAction<T>(command: Command, action: Action<T>, text: (result: T) => string): Command {
  return adminAction(
    command,
    async (rt, o, ...args) => {
      if (o.account !== undefined && !(await rt.store.accounts.get(o.account)))
        throw new Error(`no account ${o.account}`)
      return action(rt, o, ...args)
    },
    text,
  )
}

export async function ownedOrder(rt: Admin, id: number): Promise<MailOrder> {
  const order = await rt.store.orders.get(id)
  if (!order) throw new Error(`no mail order ${id}`)
  return order
}

/** Runs a tool as the account: the same checks and answers as over REST and MCP. */
export async function asAccount<T>(
  rt: Admin,
  accountId: number,
  load: () => Promise<AnyTool>,
  input: unknown,
): Promise<T> {
  // The tools and the services they run with are loaded by the command that runs one.
  const [tool, { createServices }, { createLogger }, { parseInput }] = await Promise.all([
    load(),
    import('../runtime.js'),
    import('../logger.js'),
    import('../transports/input.js'),
  ])
  // Admin commands keep stdout for their own output.
  const services = createServices(rt.store, rt.config, {
    logger: createLogger({ logLevel: 'warn' }, 2),
    clock: rt.clock,
  })
  try {
    return await tool.handler(parseInput(tool, input), { ...services, accountId, origin: '127.0.0.1' })
  } catch (err) {
    throw err instanceof MailroomError ? new Error(err.message) : err
  }
}
