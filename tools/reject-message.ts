import { decide, HeldId } from './approval-schemas.js'
import { defineTool } from './define.js'
import { GenericResponse } from './schemas.js'

export const rejectMessage = defineTool({
  name: 'rejectMessage',
  title: 'Reject a held message',
  http: { method: 'POST', path: '/mail/approvals/{id}/reject' },
  errors: [400, 403, 404, 409],
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  description:
    '[DESTRUCTIVE] Rejects a message a send policy held (`id` from getApprovals): it is never sent, and its ' +
    'content is dropped. For a person: refused (403) to an access token and to a key under a send policy; ' +
    '409 once it was decided or expired.',
  input: HeldId,
  output: GenericResponse,
  handler: ({ id }, ctx) => decide(ctx, id, 'reject'),
})
