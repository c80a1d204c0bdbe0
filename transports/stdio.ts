import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolResultSchema, ListToolsRequestSchema, type CallToolRequest } from '@modelcontextprotocol/sdk/types.js'
import { PACKAGE } from '../package-info.js'
import { DeliveryWorker } from '../relay/delivery.js'
import { deliveryTarget, HEARTBEAT_MS, runningServer } from '../relay/heartbeat.js'
import { type Intake, storeIntake } from '../relay/pipeline.js'
import { WebhookWorker } from '../relay/webhooks.js'
import { createResolver } from '../relay/routes.js'
import { createServices, type Runtime } from '../runtime.js'
import { storeName } from '../storage/index.js'
import type { ServerHeartbeat } from '../storage/store.js'
import { TOOLS } from '../tools/index.js'
import { MCP_INSTRUCTIONS, answerToolCalls, createMcpServer, mcpToolsOf } from './mcp.js'
import { keyIdentity } from './auth.js'
import type { Toolset } from './toolsets.js'

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
 * Serves the tools over stdin/stdout against the local data directory (or database), as the key's
 * account. Where a `mailroom serve` runs on the same store, what is accepted is only queued: that
 * server delivers it, with its own settings. Only while none runs does this process deliver
 * itself (a message would otherwise wait unseen in the queue), and it says so on stderr, and
 * where mail then goes. See localDelivery.
 */
export async function serveStdioLocal(rt: Runtime, apiKey: string | undefined, toolset?: Toolset): Promise<Server> {
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
  const delivery = await localDelivery(rt)
  const services = createServices(rt.store, rt.config, { logger: rt.logger, clock: rt.clock, intake: delivery.intake })
  const server = createMcpServer(services, () => ({ ...keyIdentity(owner), origin: '127.0.0.1', toolset }))
  await server.connect(new StdioServerTransport())
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= delivery
      .stop()
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

/**
 * This process's delivery, which runs only while no `mailroom serve` runs on the store (its
 * heartbeat, relay/heartbeat.ts): looked at before each message is queued and every HEARTBEAT_MS.
 * While one runs, a message is only queued, and nothing here delivers, reports to senders or
 * posts webhooks. While none does, a delivery worker and a webhook worker run here, under a name
 * of their own (this node's, `-stdio-<pid>`), so that they never take back the leases of a
 * server on the same node; leases keep two processes from delivering one recipient. At the stop
 * (stdin ends, SIGTERM, SIGINT) deliveries under way finish; the leases of a process killed before
 * that expire after MAILROOM_LEASE_TIMEOUT, and another process takes them.
 */
async function localDelivery(rt: Runtime) {
  const { config, logger, store } = rt
  const resolver = createResolver(config.delivery.dnsServers)
  const node = `${config.nodeName}-stdio-${process.pid}`
  let workers: { delivery: DeliveryWorker; webhooks: WebhookWorker } | undefined
  /** The server that delivers, none, or not looked at yet. */
  let server: ServerHeartbeat | undefined | null = null
  // Starts and stops one after the other.
  let changing = Promise.resolve()
  const start = async () => {
    if (workers) return
    const delivery = new DeliveryWorker({ ...rt, resolver, node })
    const webhooks = new WebhookWorker({ ...rt, resolver, node })
    workers = { delivery, webhooks }
    await Promise.all([delivery.start(), webhooks.start()])
  }
  const stop = async () => {
    const stopping = workers
    workers = undefined
    if (stopping) await Promise.all([stopping.delivery.stop(), stopping.webhooks.stop()])
  }
  const look = async () => {
    const now = await runningServer(rt)
    const was = server
    server = now
    if (was !== null && !was === !server) return
    if (server) {
      logger.info(
        { server: server.url, node: server.node },
        `mailroom serve at ${server.url} (node ${server.node}) delivers what this process accepts, to ${server.delivery}; this process only queues`,
      )
      changing = changing.then(stop)
    } else {
      const to = deliveryTarget(config.delivery)
      const said = `no mailroom serve runs on ${storeName(config)}: this process delivers what it accepts itself, to ${to}`
      if (config.delivery.smarthost) logger.info({ delivery: to }, said)
      else logger.warn({ delivery: to }, said)
      changing = changing.then(start)
    }
  }
  await look()
  await changing
  const looking = setInterval(
    () => void look().catch((err) => logger.error({ err }, 'looking for a running mailroom serve failed')),
    HEARTBEAT_MS,
  )
  looking.unref()
  const intake: Intake = {
    ...storeIntake(store),
    async enqueue(message) {
      await look()
      if (server) return store.mail.enqueue(message)
      await changing
      // Given to the worker, a message is leased as it is committed and starts at once.
      return workers ? workers.delivery.accept(message) : store.mail.enqueue(message)
    },
  }
  return {
    intake,
    async stop() {
      clearInterval(looking)
      changing = changing.then(stop)
      await changing
    },
  }
}

/** The MCP endpoint of a mailroom base address (`https://host` or `https://host/mcp`). */
export function mcpUrl(url: string): URL {
  const u = new URL(url)
  if (!u.pathname.replace(/\/+$/, '').endsWith('/mcp')) u.pathname = `${u.pathname.replace(/\/+$/, '')}/mcp`
  return u
}

/**
 * Serves over stdin/stdout as a client of a remote mailroom: the tool list and every call are
 * passed through to its /mcp endpoint with the API key (and the toolset, which the remote applies).
 */
export async function serveStdioRemote(url: string, apiKey: string | undefined, toolset?: Toolset): Promise<Server> {
  if (!apiKey) return refuseEveryCall(`MAILROOM_API_KEY is not set, and a remote mailroom needs one: ${KEY_HELP}`)
  const client = new Client({ name: `${PACKAGE.product}-stdio`, version: PACKAGE.version })
  const endpoint = mcpUrl(url)
  if (toolset) endpoint.searchParams.set('tools', toolset.asked)
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
