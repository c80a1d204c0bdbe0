import type { Command } from 'commander'
import type { QueueChange, WaitingRecipient } from '../storage/store.js'
import { type Admin, accountAction, accountOption, adminAction } from './common.js'

/** The response of a recipient the operator canceled, in its log row. */
const CANCELED_RESPONSE = 'canceled by the operator'

const iso = (ms: number) => new Date(ms).toISOString()

const waitingJson = (r: WaitingRecipient) => ({
  txid: r.txid,
  account: r.accountId,
  recipient: r.recipient,
  state: r.state,
  queued: iso(r.queuedAt),
  attempts: r.attempts,
  code: r.code,
  response: r.response,
  nextAttempt: r.state === 'in flight' ? null : iso(r.nextAttemptAt),
  node: r.node,
})

const waitingLine = (r: ReturnType<typeof waitingJson>) => {
  const next = r.nextAttempt ?? `now, by ${r.node}`
  // The response starts with its code. A reply of several lines goes on one: a row per recipient.
  return [
    r.txid,
    r.account,
    r.recipient,
    r.state,
    r.queued,
    r.attempts,
    next,
    r.response?.replace(/\s+/g, ' ') ?? '-',
  ].join('\t')
}

/** The change as the command reports it; an unknown transaction, or one with nothing waiting, is refused. */
function changed(txid: string | undefined, change: QueueChange | undefined): QueueChange & { txid: string | null } {
  if (!change) throw new Error(`no transaction ${txid}`)
  if (txid !== undefined && change.changed === 0 && change.inFlight === 0)
    throw new Error(`nothing of transaction ${txid} waits in the queue: every recipient is final`)
  return { txid: txid ?? null, ...change }
}

const inFlightNote = (n: number) =>
  n ? `; ${n} in flight left to the worker that holds ${n === 1 ? 'it' : 'them'}` : ''
const of = (txid: string | null) => (txid ? ` of ${txid}` : '')
const lease = (rt: Admin) => ({ now: rt.clock(), leaseMs: rt.config.delivery.leaseTimeout })

/** `queue list|retry|cancel`: the recipients still to deliver, for the operator. */
export function addQueueCommands(program: Command): void {
  const queue = program.command('queue').description('See and act on the recipients still to deliver')
  accountAction(
    queue
      .command('list')
      .description('List the recipients waiting: since when, their last reply, the next attempt')
      .addOption(accountOption().makeOptionMandatory(false)),
    async (rt, o) => (await rt.store.queue.waiting({ accountId: o.account, ...lease(rt) })).map(waitingJson),
    (rows) =>
      rows.length
        ? [
            'TXID\tACCOUNT\tRECIPIENT\tSTATE\tQUEUED\tATTEMPTS\tNEXT ATTEMPT\tLAST REPLY',
            ...rows.map(waitingLine),
          ].join('\n')
        : 'nothing waits in the queue',
  )
  adminAction(
    queue
      .command('retry')
      .description(
        "Make a transaction's waiting recipients, or every one, due now: the server tries them within a second",
      )
      .argument('[txid]', 'transaction id')
      .option('--all', 'every recipient waiting')
      .hook('preAction', (command) => {
        if (!command.args[0] === !command.opts().all) command.error('error: give a transaction id or --all')
      }),
    async (rt, _o, txid?: string) => changed(txid, await rt.store.queue.retry({ txid, ...lease(rt) })),
    (r) => `${r.changed} recipient${r.changed === 1 ? '' : 's'}${of(r.txid)} due now${inFlightNote(r.inFlight)}`,
  )
  adminAction(
    queue
      .command('cancel')
      .description(`Fail a transaction's waiting recipients for good, with the response "${CANCELED_RESPONSE}"`)
      .argument('<txid>', 'transaction id'),
    async (rt, _o, txid: string) =>
      changed(txid, await rt.store.queue.cancel({ txid, response: CANCELED_RESPONSE, ...lease(rt) })),
    (r) => `${r.changed} recipient${r.changed === 1 ? '' : 's'}${of(r.txid)} canceled${inFlightNote(r.inFlight)}`,
  )
}
