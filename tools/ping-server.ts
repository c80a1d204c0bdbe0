import { z } from 'zod'
import { defineTool } from './define.js'

const PING_TEXT = 'Server is up and running'

export const pingServer = defineTool({
  name: 'pingServer',
  title: 'Check that the mail service is up',
  http: { method: 'GET', path: '/ping' },
  public: true,
  resultKey: 'message',
  errors: [],
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Checks that mailroom answers. Returns `message` "Server is up and running". Use it to test the connection, ' +
    'or when other calls fail unexpectedly.',
  input: z.object({}),
  output: z.string().describe('"Server is up and running"'),
  handler: async () => PING_TEXT,
})
