import { decide, HeldId } from './approval-schemas.js'
import { defineTool } from './define.js'
import { GenericResponse } from './schemas.js'

export const approveMessage = defineTool({
  name: 'approveMessage',
  title: 'Approve a held message',
  http: { method: 'POST', path: '/mail/approvals/{id}/approve' },
  errors: [400, 403, 404, 409],
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  description:
    'Approves a message a send policy held (`id` from getApprovals): it is queued for delivery at once. ' +
    'For a person: refused (403) to an access token and to a key under a send policy; 409 once it was ' +
    'decided or expired.',
  input: HeldId,
  output: GenericResponse,
  handler: ({ id }, ctx) => decide(ctx, id, 'approve'),
})
