import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type {
  ElicitRequestFormParams,
  ElicitRequestURLParams,
  ServerNotification,
  ServerRequest,
} from '@modelcontextprotocol/sdk/types.js'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ElicitationModes, Hold } from '../storage/store.js'
import type { ApprovalOutcome, ApprovalQuestion, AskPerson, Services } from '../tools/define.js'
import { isObject } from './json-schema.js'

/**
 * Asking the person at an MCP client to approve a held message, in the conversation (MCP
 * elicitation, docs/approval.md "Approval in the conversation"). The message is held, in the
 * store, before anyone is asked: the question only decides it sooner. Its answer may reach any
 * node (a client POSTs it to /mcp like any request); that node applies it through the store, and
 * the node whose tool call is waiting reads the hold there. Nothing here needs node affinity.
 */

/**
 * How long a send waits for the person's answer before it answers `held`: under the 60 s an MCP
 * client (the SDK's default) waits for a tool call. A later answer still decides the message.
 */
export const ELICITATION_WAIT_MS = 50_000
/** How often a waiting call reads its hold, for an answer that reached another node. */
const POLL_MS = 250

/** The prefix of our elicitation ids: a response with one is an answer to us, never a request of the SDK's. */
export const ELICITATION_ID_PREFIX = 'mr-el-'
/**
 * A URL-mode question's id says so: its `accept` only says the person opened the page, where the
 * decision is made, so the answer intake must tell the two modes apart without a lookup.
 */
const URL_ID_PREFIX = `${ELICITATION_ID_PREFIX}u-`
const FORM_ID_PREFIX = `${ELICITATION_ID_PREFIX}f-`

/** Who decided, when the person at the client answered. */
export const ELICITATION_DECIDER = 'the person at the MCP client'

/** The waiting calls of this node, by elicitation id: an answer that lands here wakes its call at once. */
const waiting = new Map<string, () => void>()

/** Wakes the call waiting on this node for that elicitation, if any (its answer was applied). */
export function wakeAsker(elicitationId: string): void {
  waiting.get(elicitationId)?.()
}

/** The modes an initialize's `capabilities.elicitation` declares, as the SDK reads them: `{}` is form mode. */
export function elicitationModesOf(capabilities: unknown): ElicitationModes | null {
  if (!isObject(capabilities) || !isObject(capabilities.elicitation)) return null
  const declared = capabilities.elicitation
  if (Object.keys(declared).length === 0) return { form: true, url: false }
  const modes = { form: isObject(declared.form), url: isObject(declared.url) }
  return modes.form || modes.url ? modes : null
}

/** What the person's answer to one of our questions does to its hold (the intake applies it). */
export type ElicitationAnswer =
  /** accept, decline or cancel, through store.holds.answer. */
  | { apply: 'accept' | 'decline' | 'cancel' }
  /** Nothing: a URL-mode `accept` (the person went to the console, which decides). */
  | { apply: 'nothing' }

/**
 * What an answer to the elicitation `id` means. Form mode: `accept` with `decision: 'reject'` is a
 * decline; an error from the client (it could not show the question) leaves the message held, as
 * a cancel. URL mode: a decline or cancel only ends the wait (the message stays held).
 */
export function answerOf(id: string, message: { result?: unknown; error?: unknown }): ElicitationAnswer {
  const result = isObject(message.result) ? message.result : {}
  const action = result.action
  if (id.startsWith(URL_ID_PREFIX)) return action === 'accept' ? { apply: 'nothing' } : { apply: 'cancel' }
  if (action === 'accept')
    return isObject(result.content) && result.content.decision === 'reject' ? { apply: 'decline' } : { apply: 'accept' }
  return { apply: action === 'decline' ? 'decline' : 'cancel' }
}

/** A JSON-RPC response (no method) to one of our questions. */
export function isElicitationAnswer(m: unknown): m is { id: string; result?: unknown; error?: unknown } {
  return (
    isObject(m) &&
    !('method' in m) &&
    ('result' in m || 'error' in m) &&
    typeof m.id === 'string' &&
    m.id.startsWith(ELICITATION_ID_PREFIX)
  )
}

/** What the person reads: the envelope, the first lines, why it is held, and where else to decide. */
export function questionText(q: ApprovalQuestion, url: boolean): string {
  const until = new Date(q.expiresAt).toISOString()
  return [
    `An agent wants to send this message; it is held until a person approves it (${q.reason}).`,
    `From: ${q.from}`,
    `To (${q.to.length}): ${q.to.join(', ')}`,
    `Subject: ${q.subject ?? '(none)'}`,
    '',
    q.preview,
    '',
    url
      ? `Approve or reject it in the console: ${q.approvalUrl} (until ${until}).`
      : `Dismiss this to decide later in the console: ${q.approvalUrl} (until ${until}).`,
  ].join('\n')
}

/** The form: one choice, approve or reject. */
const DECISION_FORM: ElicitRequestFormParams['requestedSchema'] = {
  type: 'object',
  properties: {
    decision: {
      type: 'string',
      title: 'Send this message?',
      oneOf: [
        { const: 'approve', title: 'Approve: send it now' },
        { const: 'reject', title: 'Reject: never send it' },
      ],
      default: 'approve',
    },
  },
  required: ['decision'],
}

const outcomeOf = (hold: Hold | undefined): ApprovalOutcome | undefined =>
  hold?.status === 'approved'
    ? 'approved'
    : hold?.status === 'rejected'
      ? 'rejected'
      : !hold || hold.elicitationState === 'cancelled'
        ? 'held'
        : undefined

/**
 * The `ask` of a tool call that `server` answers on an SSE stream (transports/mcp-http.ts): it
 * writes `elicitation/create` on that stream, with our own id (stored on the hold, so that any
 * node can apply the answer), then waits for the hold to be decided or the question dismissed,
 * at most ELICITATION_WAIT_MS. The request is written on the transport, not through the SDK's
 * `elicitInput`: that would wait for the answer on this server, which another node may get, and
 * this server never saw the client's capabilities (the session's initialize was another request).
 */
export function askVia(
  server: Server,
  extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  modes: ElicitationModes,
  { store, logger }: Pick<Services, 'store' | 'logger'>,
): AskPerson {
  return async (q) => {
    const transport = server.transport
    if (!transport) return 'held'
    const url = modes.url
    const id = (url ? URL_ID_PREFIX : FORM_ID_PREFIX) + randomBytes(12).toString('base64url')
    if (!(await store.holds.asking({ txid: q.txid, elicitationId: id })))
      return outcomeOf(await store.holds.get(q.txid)) ?? 'held'
    const message = questionText(q, url)
    const params: ElicitRequestFormParams | ElicitRequestURLParams = url
      ? { mode: 'url', elicitationId: id, url: q.approvalUrl, message }
      : { mode: 'form', message, requestedSchema: DECISION_FORM }
    const related = { relatedRequestId: extra.requestId }
    try {
      await transport.send({ jsonrpc: '2.0', id, method: 'elicitation/create', params }, related)
    } catch (err) {
      // The stream is gone (the client hung up): the message stays held for the console.
      logger.warn({ err, txid: q.txid }, 'could not ask the person at the MCP client')
      return 'held'
    }
    const outcome = await waitForDecision(store, q.txid, id, extra.signal)
    // URL mode: tell the client the page's business is done (MCP 2025-11-25).
    if (url && outcome !== 'held')
      await transport
        .send({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId: id } }, related)
        .catch(() => {})
    return outcome
  }
}

/**
 * Reads the hold until it is decided or its question dismissed: every POLL_MS, and at once when
 * its answer lands on this node. Waiting ELICITATION_WAIT_MS, or the call being cancelled, leaves
 * it held.
 */
async function waitForDecision(
  store: Services['store'],
  txid: string,
  id: string,
  signal: AbortSignal,
): Promise<ApprovalOutcome> {
  const deadline = Date.now() + ELICITATION_WAIT_MS
  try {
    while (!signal.aborted && Date.now() < deadline) {
      // Listening before reading: an answer applied in between still wakes the wait below.
      const woken = new AbortController()
      waiting.set(id, () => woken.abort())
      const outcome = outcomeOf(await store.holds.get(txid))
      if (outcome) return outcome
      const wait = Math.min(POLL_MS, deadline - Date.now())
      await sleep(wait, undefined, { signal: AbortSignal.any([woken.signal, signal]) }).catch(() => {})
    }
    return 'held'
  } finally {
    waiting.delete(id)
  }
}
