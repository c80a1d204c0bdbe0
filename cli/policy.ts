import { type Command, InvalidArgumentError, type OptionValues } from 'commander'
import { DEFAULT_POLICY, holderLabel, type PolicyHolder, type SendPolicy } from '../storage/store.js'
import { type Admin, adminAction, positiveInt, senderPattern } from './common.js'

// `mailroom account key policy`, `account grant policy` and `order policy`: one set of options
// for a send policy, wherever it is set (docs/approval.md).

const MODES = ['none', 'new-recipients', 'always'] as const

const mode = (value: string) => {
  if (!(MODES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`--approval must be one of ${MODES.join(', ')}`)
  return value as SendPolicy['approval']
}

/** A limit: a positive integer, or `off` for none (kept as 'off': commander reads a parser's null as ''). */
const limit = (name: string) => (value: string) => (value === 'off' ? 'off' : positiveInt(name)(value))
const limitOf = (value: number | 'off' | undefined) => (value === 'off' ? null : value)

/** `--allow`, repeatable or comma-separated; `any` clears the list (any recipient). */
const allow = (value: string, previous: string[] | undefined) => {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  if (items.includes('any')) return []
  return [...(previous ?? []), ...items.map((item) => senderPattern(item).toLowerCase())]
}

/** The send policy's options on `command`. */
function policyOptions(command: Command): Command {
  return command
    .option('--approval <mode>', `which sends wait for a person: ${MODES.join(', ')}`, mode)
    .option(
      '--approve-above <n|off>',
      'a send to more recipients than this waits for a person',
      limit('--approve-above'),
    )
    .option('--max-per-hour <n|off>', 'sends per UTC hour; past them a send is refused (429)', limit('--max-per-hour'))
    .option('--max-per-day <n|off>', 'sends per UTC day; past them a send is refused (429)', limit('--max-per-day'))
    .option(
      '--allow <patterns>',
      'the only recipients it may send to: addresses or @domains, repeatable or comma-separated; `any` for every one',
      allow,
    )
    .option('--clear', 'remove the policy: its sends go as without one')
}

/** The policy the options make of `current`; undefined when they change nothing. */
export function changedPolicy(current: SendPolicy | null, o: OptionValues): SendPolicy | null | undefined {
  const given = {
    approval: o.approval,
    approveAbove: limitOf(o.approveAbove),
    maxPerHour: limitOf(o.maxPerHour),
    maxPerDay: limitOf(o.maxPerDay),
    allowedRecipients: o.allow,
  }
  const set = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined))
  if (o.clear) {
    if (Object.keys(set).length) throw new Error('--clear removes the policy: give it alone')
    return null
  }
  if (!Object.keys(set).length) return undefined
  return { ...(current ?? DEFAULT_POLICY), ...set }
}

/** A policy in one line, as the command prints it (the console's Keys table says the same). */
export function policySummary(p: SendPolicy | null | undefined): string {
  if (!p) return 'none'
  const parts = [
    p.approval === 'always' ? 'approve every send' : p.approval === 'new-recipients' ? 'approve new recipients' : null,
    p.approveAbove === null ? null : `approve above ${p.approveAbove} recipients`,
    p.maxPerHour === null ? null : `${p.maxPerHour}/hour`,
    p.maxPerDay === null ? null : `${p.maxPerDay}/day`,
    p.allowedRecipients.length ? `only to ${p.allowedRecipients.join(', ')}` : null,
  ].filter(Boolean)
  return parts.join('; ') || 'no limits'
}

/**
 * Adds `<parent> policy <arg>`: prints the policy of what `holderOf` finds, or sets it from the
 * options. `holderOf` answers the holder and its name, or throws when there is none.
 */
export function addPolicyCommand(
  parent: Command,
  description: string,
  argument: [name: string, description: string],
  holderOf: (rt: Admin, arg: string) => Promise<PolicyHolder>,
): void {
  adminAction(
    policyOptions(parent.command('policy').description(description).argument(argument[0], argument[1])),
    async (rt, o, arg: string) => {
      const holder = await holderOf(rt, arg)
      const label = holderLabel(holder)
      const current = await rt.store.policies.get(holder)
      if (current === undefined) throw new Error(`no ${label}`)
      const next = changedPolicy(current, o)
      if (next !== undefined && !(await rt.store.policies.set(holder, next))) throw new Error(`no ${label}`)
      const policy = next === undefined ? current : next
      return { holder: label, changed: next !== undefined, policy, summary: policySummary(policy) }
    },
    (r) => `send policy of ${r.holder}${r.changed ? ' set' : ''}: ${r.summary}`,
  )
}
