import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { ConfigSchema } from '../config.js'
import { buildCli } from '../cli/index.js'
import { PACKAGE } from '../package-info.js'
import { TOOLS } from '../tools/index.js'
import { createMcpServer } from '../transports/mcp.js'
import { honoPath } from '../transports/rest.js'
import { createTestEnv, type TestEnv } from './helpers.js'
import { loadUpstream } from './openapi.js'

// One registry feeds every door and document; this fails when any of them drifts from it.

const CONTRACT_TOOLS = [
  'pingServer',
  'getMailOrders',
  'getMailOrderById',
  'sendMail',
  'rawMail',
  'sendAdvMail',
  'viewMailLog',
  'getStats',
  'getMailBlocks',
  'delistBlock',
  'getRules',
  'addRule',
  'deleteRule',
]

const SERVER_JSON = JSON.parse(readFileSync(new URL('../server.json', import.meta.url), 'utf8'))

/**
 * The rules of the MCP registry's server.json schema (2025-12-11) that a manifest like ours must
 * meet, written out: reverse-DNS name with one slash, a description of at most 100 characters,
 * an exact version, npm packages with an exact version and a transport, typed arguments and
 * named environment variables.
 */
const Input = z.object({
  description: z.string().optional(),
  isRequired: z.boolean().optional(),
  isSecret: z.boolean().optional(),
  default: z.string().optional(),
  value: z.string().optional(),
  format: z.enum(['string', 'number', 'boolean', 'filepath']).optional(),
})
const RegistryServerJson = z
  .object({
    $schema: z.literal('https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json'),
    name: z
      .string()
      .min(3)
      .max(200)
      .regex(/^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/),
    title: z.string().min(1).max(100).optional(),
    description: z.string().min(1).max(100),
    version: z
      .string()
      .max(255)
      .regex(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/),
    packages: z
      .array(
        z
          .object({
            registryType: z.literal('npm'),
            identifier: z.string().min(1),
            version: z
              .string()
              .min(1)
              .refine((v) => v !== 'latest' && !/[\^~><*x]/.test(v), 'an exact version'),
            runtimeHint: z.string().optional(),
            transport: z.object({ type: z.enum(['stdio', 'streamable-http', 'sse']) }),
            packageArguments: z
              .array(
                z.union([
                  Input.extend({ type: z.literal('positional'), value: z.string() }),
                  Input.extend({ type: z.literal('named'), name: z.string() }),
                ]),
              )
              .optional(),
            environmentVariables: z.array(Input.extend({ name: z.string() })).optional(),
          })
          .strict(),
      )
      .min(1),
  })
  .strict()

describe('drift', () => {
  let env: TestEnv
  beforeAll(async () => (env = await createTestEnv()))
  afterAll(() => env.close())

  it('the registry holds every contract tool, and extensions only at paths the contract does not have', () => {
    const names = TOOLS.map((t) => t.name)
    for (const name of CONTRACT_TOOLS) expect(names).toContain(name)
    // An extension (webhooks, …) never takes a path of the contract: its clients see the contract's API unchanged.
    const contractPaths = new Set(Object.keys(loadUpstream().paths as object))
    for (const t of TOOLS.filter((t) => !CONTRACT_TOOLS.includes(t.name)))
      expect(contractPaths.has(t.http.path), t.name).toBe(false)
    expect(new Set(TOOLS.map((t) => `${t.http.method} ${t.http.path}`)).size).toBe(TOOLS.length)
  })

  it('REST has one route per tool and no other API route', () => {
    const routes = env.app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`)
    for (const t of TOOLS) expect(routes).toContain(`${t.http.method} ${honoPath(t.http.path)}`)
    const prefixes = [...new Set(TOOLS.map((t) => t.http.path.split('/')[1]))]
    const api = routes.filter((r) => prefixes.some((p) => r.includes(` /${p}`)))
    expect(api.sort()).toEqual(TOOLS.map((t) => `${t.http.method} ${honoPath(t.http.path)}`).sort())
  })

  it('OpenAPI has one operation per tool', async () => {
    const doc = await (await env.app.request('/spec/openapi.json')).json()
    const ops = Object.entries(doc.paths as Record<string, Record<string, { operationId: string }>>).flatMap(
      ([path, item]) => Object.entries(item).map(([method, op]) => `${method.toUpperCase()} ${path} ${op.operationId}`),
    )
    expect(ops.sort()).toEqual(TOOLS.map((t) => `${t.http.method} ${t.http.path} ${t.name}`).sort())
  })

  it('the MCP tool list and the server card list every tool, with the same schemas', async () => {
    const server = createMcpServer(env.services, () => ({ accountId: env.accountId, origin: '127.0.0.1' }))
    const [a, b] = InMemoryTransport.createLinkedPair()
    const client = new Client({ name: 'drift', version: '1' })
    await Promise.all([server.connect(a), client.connect(b)])
    const { tools } = await client.listTools()
    await client.close()
    expect(tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name))
    const card = await (await env.app.request('/.well-known/mcp/server.json')).json()
    expect(card.tools).toEqual(JSON.parse(JSON.stringify(tools)))
  })

  it('server.json meets the MCP registry schema and matches the package and the CLI', () => {
    const parsed = RegistryServerJson.safeParse(SERVER_JSON)
    expect(parsed.error?.issues ?? []).toEqual([])
    expect(SERVER_JSON.version).toBe(PACKAGE.version)
    const packageJson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
    // The registry verifies an npm package by its mcpName, which must be the server's name.
    expect(packageJson.mcpName).toBe(SERVER_JSON.name)
    const pkg = SERVER_JSON.packages[0]
    // MCP clients run the package server.json names: this one, published under our scope. The
    // unscoped `mailroom` on npm is somebody else's package; `mailroom` is only the command.
    expect(pkg).toMatchObject({
      identifier: packageJson.name,
      version: packageJson.version,
      transport: { type: 'stdio' },
    })
    expect(packageJson.name).toMatch(/^@[a-z0-9-]+\/mailroom$/)
    expect(packageJson.bin).toEqual({ mailroom: 'bin/mailroom.js' })
    expect(PACKAGE).toMatchObject({ name: packageJson.name, product: 'mailroom' })
    // The command it runs and the settings it names exist.
    expect(buildCli().commands.map((c) => c.name())).toContain(pkg.packageArguments[0].value)
    const stdio = buildCli().commands.find((c) => c.name() === 'stdio')!
    for (const named of pkg.packageArguments.slice(1)) expect(stdio.options.map((o) => o.long)).toContain(named.name)
    for (const v of pkg.environmentVariables) expect(Object.keys(ConfigSchema.shape)).toContain(v.name)
    expect(SERVER_JSON.description.length).toBeLessThanOrEqual(100)
  })
})
