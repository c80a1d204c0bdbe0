import type { z } from 'zod'
import { MailroomError } from '../errors.js'
import type { Submitted } from '../relay/pipeline.js'
import type { Hold } from '../storage/store.js'
import { ok } from './common.js'
import type { ToolContext } from './define.js'
import type { SendResponse } from './schemas.js'

/** The preview the person is shown: at most this many lines and characters of the message's text. */
const PREVIEW_LINES = 5
const PREVIEW_CHARS = 500

/**
 * What a send answers (docs/approval.md): `ok` and its transaction id when it was queued. A held
 * message is already stored; when the caller's MCP client can ask its person (ctx.ask), the
 * person decides now: approved, it answers `ok`; declined, a 403 (nothing was sent). Else, or
 * when the person put it off, `held` with where and until when a person can decide.
 */
export async function sendAnswer(
  ctx: ToolContext,
  submitted: Submitted,
  text: string | null,
): Promise<z.input<typeof SendResponse>> {
  const { txid, hold } = submitted
  if (!hold) return ok(txid)
  if (ctx.ask) {
    const outcome = await ctx.ask({
      txid,
      from: hold.envFrom,
      to: hold.recipients,
      subject: hold.subject,
      preview: previewOf(text),
      reason: hold.reason,
      approvalUrl: hold.approvalUrl,
      expiresAt: hold.expiresAt,
    })
    if (outcome === 'approved') return ok(txid)
    if (outcome === 'rejected')
      throw new MailroomError(
        403,
        `the person at the MCP client declined message ${txid}; it was rejected and nothing was sent`,
      )
  }
  return heldAnswer(hold)
}

/** A held message as a send answers it: `text` is still its transaction id. */
export const heldAnswer = (hold: Hold) => ({
  status: 'held',
  text: hold.txid,
  approvalUrl: hold.approvalUrl,
  expiresAt: new Date(hold.expiresAt).toISOString(),
  reason: hold.reason,
})

/** The first lines of a message's text, as short as the question to the person must be. */
export function previewOf(text: string | null): string {
  if (!text) return ''
  const lines = text.replace(/\r\n/g, '\n').trim().split('\n').slice(0, PREVIEW_LINES).join('\n')
  return lines.length > PREVIEW_CHARS ? `${lines.slice(0, PREVIEW_CHARS - 1)}…` : lines
}
