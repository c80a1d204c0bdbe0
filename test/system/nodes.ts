import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTestDatabase } from '../storage/postgres.js'
import { startMailroom, waitFor } from './peers.js'

// Several `mailroom serve` processes over one PostgreSQL database, and the balancer before them:
// what the system tests of nodes share.

export type Node = Awaited<ReturnType<typeof startMailroom>> & { name: string }

/**
 * `node-a`, then `node-b`, on a new PostgreSQL database, delivering to the smarthost at
 * `sinkPort`, each with a data directory of its own (for its certificate); `cleanup` gets what
 * ends them. `banner` is what node-a printed on the database's first start (its API key).
 */
export async function startTwoNodes(sinkPort: number, cleanup: (() => unknown)[]) {
  const db = await createTestDatabase()
  cleanup.push(db.drop)
  const env: Record<string, string> = {
    MAILROOM_DATABASE_URL: db.url,
    MAILROOM_SECRET_KEY: randomBytes(32).toString('base64'),
    MAILROOM_SMARTHOST: `127.0.0.1:${sinkPort}`,
    MAILROOM_LEASE_TIMEOUT: '5s',
  }
  const startNode = async (name: string): Promise<Node> => {
    const parent = mkdtempSync(join(tmpdir(), `mailroom-${name}-`))
    cleanup.push(() => rmSync(parent, { recursive: true, force: true }))
    // A data directory that does not exist yet: with a server database, only the certificate goes there.
    const dataDir = join(parent, 'data')
    const node = await startMailroom({ ...env, MAILROOM_DATA_DIR: dataDir, MAILROOM_NODE_NAME: name })
    cleanup.push(() => node.child.kill('SIGKILL'))
    return { ...node, name }
  }
  // The first node makes the database's first account; the second starts beside it.
  const a = await startNode('node-a')
  const banner = await waitFor(async () => /Try it/.test(a.output()) && a.output())
  const b = await startNode('node-b')
  return { a, b, env, banner }
}

/** A request the proxy passed on: to which node, the JSON-RPC methods in its body, the node's status. */
export type Served = { node: string; method: string; rpc: string; status?: number }

/**
 * A round-robin balancer, as the README recommends before several nodes: each request goes to the
 * next node in turn, on a connection of its own, whatever came before it.
 */
export async function roundRobin(nodes: Node[]) {
  const served: Served[] = []
  let next = 0
  const server = createServer(async (req, res) => {
    const node = nodes[next++ % nodes.length]
    const entry: Served = { node: node.name, method: req.method!, rpc: '' }
    served.push(entry)
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk)
    const body = Buffer.concat(chunks)
    if (body.length)
      entry.rpc = [JSON.parse(body.toString())]
        .flat()
        .map((m: { method: string }) => m.method)
        .join()
    const upstream = request(
      { host: '127.0.0.1', port: node.httpPort, method: req.method, path: req.url, headers: req.headers, agent: false },
      (answer) => {
        entry.status = answer.statusCode
        res.writeHead(answer.statusCode!, answer.headers)
        answer.pipe(res)
      },
    )
    upstream.on('error', (err) => res.destroy(err))
    upstream.end(body)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`),
    served,
    close: () =>
      new Promise((r) => {
        server.close(r)
        server.closeAllConnections()
      }),
  }
}
