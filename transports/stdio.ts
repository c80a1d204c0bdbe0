import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolResultSchema, ListToolsRequestSchema, type CallToolRequest } from '@modelcontextprotocol/sdk/types.js'
import { PACKAGE } from '../package-info.js'
import { deliverInProcess } from '../relay/delivery.js'
import { WebhookWorker } from '../relay/webhooks.js'
import { createResolver } from '../relay/routes.js'
import { createServices, type Runtime } from '../runtime.js'
import { storeName } from '../storage/index.js'
import { TOOLS } from '../tools/index.js'
import { MCP_INSTRUCTIONS, answerToolCalls, createMcpServer, mcpToolsOf } from './mcp.js'

// stdout carries JSON-RPC only: every log line goes to stderr (see createLogger).

/** An MCP server for stdio with the given instructions, its tools and calls yet to be answered. */
const stdioServer = (instructions: string) =>
  new Server(
    { name: PACKAGE.product, title: 'mailroom', version: PACKAGE.version },
    { capabilities: { tools: { listChanged: false } }, instructions },
  )

/**
 * Without a usable key the server still starts, so that the MCP client can show why: the
 * instructions and every tool call say what is wrong with MAILROOM_API_KEY and how to fix it (an
 * exit before the handshake reaches the user only as a closed connection, the reason on stderr).
 */
async function refuseEveryCall(reason: string): Promise<Server> {
  const server = stdioServer(`mailroom cannot act: ${reason}`)
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: mcpToolsOf(TOOLS) }))
  answerToolCalls(server, async () => ({
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ code: 401, message: reason }) }],
  }))
  await server.connect(new StdioServerTransport())
  return server
}

const KEY_HELP =
  "set it in the MCP client's configuration of this server to an API key of the account (`mailroom account key create --account <id>` makes one), then restart the server"

/**
 * Serves the tools over stdin/stdout against the local data directory, as the key's account, and
 * delivers: a message sent while no `mailroom serve` runs would otherwise wait unseen in the
 * queue. The worker holds its leases under a name of its own (this node's, `-stdio-<pid>`), so
 * that it never takes back those of a `serve` on the same node, which may run beside it: leases
 * keep two processes from delivering one recipient. It stops when stdin ends or at SIGTERM or
 * SIGINT, once its deliveries under way are done; the leases of a process killed before that
 * expire after MAILROOM_LEASE_TIMEOUT (10 minutes by default), and another node takes them.
 */
export async function serveStdioLocal(rt: Runtime, apiKey: string | undefined): Promise<Server> {
  const owner = apiKey ? await rt.store.apiKeys.owner(apiKey) : undefined
  if (owner === undefined) {
    const reason = apiKey
      ? `MAILROOM_API_KEY is not a key of ${storeName(rt.config)}, or it was revoked: ${KEY_HELP}`
      : `MAILROOM_API_KEY is not set: ${KEY_HELP}`
    rt.logger.error(reason)
    const server = await refuseEveryCall(reason)
    server.onclose = () => void rt.close()
    return server
  }
  const { config } = rt
  const resolver = createResolver(config.delivery.dnsServers)
  const node = `${config.nodeName}-stdio-${process.pid}`
  const { worker: delivery, intake } = await deliverInProcess({ ...rt, resolver, node })
  const webhooks = new WebhookWorker({ ...rt, resolver, node })
  await webhooks.start()
  // The tools' relay hands accepted messages to this process's worker, which starts them at once.
  const services = createServices(rt.store, config, { logger: rt.logger, clock: rt.clock, intake })
  const server = createMcpServer(services, () => ({ ...owner, origin: '127.0.0.1' }))
  await server.connect(new StdioServerTransport())
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= Promise.all([delivery.stop(), webhooks.stop()])
      .then(() => rt.close())
      .then(
        () => process.exit(0),
        (err) => {
          rt.logger.error({ err }, 'stopping failed')
          process.exit(1)
        },
      ))
  process.stdin.once('end', stop)
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
  return server
}

/** The MCP endpoint of a mailroom base address (`https://host` or `https://host/mcp`). */
export function mcpUrl(url: string): URL {
  const u = new URL(url)
  if (!u.pathname.replace(/\/+$/, '').endsWith('/mcp')) u.pathname = `${u.pathname.replace(/\/+$/, '')}/mcp`
  return u
}

/**
 * Serves over stdin/stdout as a client of a remote mailroom: the tool list and every call are
 * passed through to its /mcp endpoint with the API key.
 */
export async function serveStdioRemote(url: string, apiKey: string | undefined): Promise<Server> {
  if (!apiKey) return refuseEveryCall(`MAILROOM_API_KEY is not set, and a remote mailroom needs one: ${KEY_HELP}`)
  const client = new Client({ name: `${PACKAGE.product}-stdio`, version: PACKAGE.version })
  const endpoint = mcpUrl(url)
  try {
    await client.connect(
      new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { 'X-API-KEY': apiKey } } }),
    )
  } catch (err) {
    // fetch says only "fetch failed"; its cause says why (refused, unknown host, …).
    const cause = (err as Error & { cause?: Error }).cause?.message
    throw new Error(`cannot reach the mailroom at ${endpoint}: ${(err as Error).message}${cause ? ` (${cause})` : ''}`)
  }
  const server = stdioServer(client.getInstructions() ?? MCP_INSTRUCTIONS)
  server.setRequestHandler(ListToolsRequestSchema, (request) => client.listTools(request.params))
  // Passed on as sent: the remote refuses a bad name or arguments as it refuses any bad argument.
  answerToolCalls(server, (params) =>
    client.request({ method: 'tools/call', params: params as CallToolRequest['params'] }, CallToolResultSchema),
  )
  server.onclose = () => void client.close()
  await server.connect(new StdioServerTransport())
  return server
}
