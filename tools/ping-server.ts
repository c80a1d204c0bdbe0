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
    'Health check. Takes no input, and over REST (GET /ping) needs no API key. Returns the text "Server is up and running" when the ' +
    'service answers. Use it to confirm the connection before other calls, or when another tool fails unexpectedly.',
  input: z.object({}),
  output: z.string().describe('"Server is up and running"'),
  handler: async () => PING_TEXT,
})
