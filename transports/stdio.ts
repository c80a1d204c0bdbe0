import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolResultSchema, ListToolsRequestSchema, type CallToolRequest } from '@modelcontextprotocol/sdk/types.js'
import { PACKAGE } from '../package-info.js'
import type { Services } from '../tools/define.js'
import { MCP_INSTRUCTIONS, answerToolCalls, createMcpServer } from './mcp.js'

// stdout carries JSON-RPC only: every log line goes to stderr (see createLogger).

/** Serves the tools over stdin/stdout against the local data directory, as the key's account. */
export async function serveStdioLocal(services: Services, apiKey: string | undefined): Promise<Server> {
  const accountId = apiKey ? await services.store.apiKeys.authenticate(apiKey) : undefined
  if (accountId === undefined) throw new Error('MAILROOM_API_KEY is missing or not a valid key of this data directory')
  const server = createMcpServer(services, () => ({ accountId, origin: '127.0.0.1' }))
  await server.connect(new StdioServerTransport())
  return server
}

/** The MCP endpoint of a mailroom base address (`https://host` or `https://host/mcp`). */
export function mcpUrl(url: string): URL {
  const u = new URL(url)
  if (!u.pathname.replace(/\/+$/, '').endsWith('/mcp')) u.pathname = u.pathname.replace(/\/+$/, '') + '/mcp'
  return u
}

/**
 * Serves over stdin/stdout as a client of a remote mailroom: the tool list and every call are
 * passed through to its /mcp endpoint with the API key.
 */
export async function serveStdioRemote(url: string, apiKey: string | undefined): Promise<Server> {
  if (!apiKey) throw new Error('MAILROOM_API_KEY is required to reach a remote mailroom')
  const client = new Client({ name: `${PACKAGE.name}-stdio`, version: PACKAGE.version })
  const endpoint = mcpUrl(url)
  try {
    await client.connect(new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { 'X-API-KEY': apiKey } } }))
  } catch (err) {
    // fetch says only "fetch failed"; its cause says why (refused, unknown host, …).
    const cause = (err as Error & { cause?: Error }).cause?.message
    throw new Error(`cannot reach the mailroom at ${endpoint}: ${(err as Error).message}${cause ? ` (${cause})` : ''}`)
  }
  const server = new Server(
    { name: PACKAGE.name, title: 'mailroom', version: PACKAGE.version },
    { capabilities: { tools: { listChanged: false } }, instructions: client.getInstructions() ?? MCP_INSTRUCTIONS },
  )
  server.setRequestHandler(ListToolsRequestSchema, (request) => client.listTools(request.params))
  // Passed on as sent: the remote refuses a bad name or arguments as it refuses any bad argument.
  answerToolCalls(server, (params) => client.request({ method: 'tools/call', params: params as CallToolRequest['params'] }, CallToolResultSchema))
  server.onclose = () => void client.close()
  await server.connect(new StdioServerTransport())
  return server
}
