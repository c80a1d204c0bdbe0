import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Received {
  /** The request's path. */
  url: string
  headers: IncomingHttpHeaders
  body: string
  /** The parsed body. */
  event: { type: string; timestamp: string; data: Record<string, unknown> }
}

/**
 * A webhook endpoint: a Node http server on 127.0.0.1, port 0, recording every request.
 * `answer` decides the status of the n-th request (1-based), or 'hang' to never answer.
 */
export async function startEndpoint(answer: (n: number, r: Received) => number | 'hang' = () => 200) {
  const received: Received[] = []
  const hanging: ServerResponse[] = []
  const state = { answer }
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk) => (body += chunk))
    req.on('end', () => {
      const r = { url: req.url ?? '', headers: req.headers, body, event: JSON.parse(body) }
      received.push(r)
      const status = state.answer(received.length, r)
      if (status === 'hang') return void hanging.push(res)
      res.statusCode = status
      res.end(status >= 300 ? 'endpoint says no' : 'ok')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    state,
    /** The requests of one event type. */
    of: (type: string) => received.filter((r) => r.event.type === type),
    async close() {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}
