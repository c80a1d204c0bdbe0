import { type Command, InvalidArgumentError, Option } from 'commander'
import { accountAction, adminAction, positiveInt } from './common.js'

// `mailroom approvals`: the operator decides messages held for a person's approval, of any
// account (docs/approval.md). The console does the same for an account's person.

const BY = 'the operator (mailroom approvals)'
const txidOf = (value: string) => {
  if (!/^[0-9a-fA-F]{18,19}$/.test(value))
    throw new InvalidArgumentError('must be a transaction id: 18 or 19 hex characters')
  return value.toLowerCase()
}

export function addApprovalCommands(program: Command): void {
  const approvals = program
    .command('approvals')
    .description("List, approve and reject messages held for a person's approval (send policies)")
  accountAction(
    approvals
      .command('list')
      .description('List held messages, newest first: those waiting, unless --status says otherwise')
      .option('--account <id>', 'only this account', positiveInt('--account'))
      .addOption(
        new Option('--status <status>', 'which ones').choices(['held', 'approved', 'rejected', 'all']).default('held'),
      )
      .option('--limit <n>', 'at most this many', positiveInt('--limit'), 100),
    async (rt, o) => {
      const { approvalRecord } = await import('../tools/approval-schemas.js')
      const { total, rows } = await rt.store.holds.list({
        accountId: o.account,
        ...(o.status === 'all' ? {} : { status: o.status }),
        skip: 0,
        limit: o.limit,
      })
      return { total, approvals: rows.map((h) => ({ ...approvalRecord(h), account: h.accountId, order: h.orderId })) }
    },
    (r) =>
      [
        ...r.approvals.map(
          (h) =>
            `${h.id}\t${h.status}\taccount ${h.account}\t${h.from} -> ${h.to.join(', ')}\t${h.subject ?? '(no subject)'}\t` +
            `${h.reason}\t${h.status === 'held' ? `expires ${h.expiresAt}` : `${h.decidedBy} at ${h.decidedAt}`}`,
        ),
        ...(r.total > r.approvals.length ? [`(${r.total - r.approvals.length} more: --limit)`] : []),
      ].join('\n') || 'no held messages',
  )
  for (const [decision, verb, description, done] of [
    ['approve', 'approved', 'Approve a held message: it is queued for delivery at once', 'queued for delivery'],
    [
      'reject',
      'rejected',
      'Reject a held message: it is never sent, and its content is dropped',
      'it will never be sent',
    ],
  ] as const) {
    adminAction(
      approvals.command(decision).description(description).argument('<txid>', 'its transaction id', txidOf),
      async (rt, _o, txid: string) => {
        const decided = await rt.store.holds.decide({ txid, decision, by: BY, now: rt.clock() })
        if (!decided) throw new Error(`no held message ${txid}`)
        if (decided.state === 'already') {
          const { decisionInWords } = await import('../tools/approval-schemas.js')
          throw new Error(`message ${txid} was not ${verb}: it ${decisionInWords(decided.hold)}`)
        }
        return { id: txid, status: decided.hold.status, decidedBy: BY }
      },
      (r) => `${r.id} ${verb}: ${done}`,
    )
  }
}
