import type { Hono } from 'hono'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { stringify } from 'yaml'
import type { Config } from '../config.js'
import { PACKAGE } from '../package-info.js'
import { TOOLS } from '../tools/index.js'
import { MCP_INSTRUCTIONS, MCP_PROTOCOL_VERSION, mcpToolsOf } from './mcp.js'
import { openApiDocument } from './openapi.js'
import { SCOPE_NAMES } from './scopes.js'

/** The contract's version of the agent-tool server card. */
export const SERVER_CARD_VERSION = '1.0.0'

/** The MCP server card: how to reach and authenticate to /mcp, and the tool list. */
export function serverCard(config: Pick<Config, 'publicUrl'>) {
  return {
    version: SERVER_CARD_VERSION,
    protocolVersion: MCP_PROTOCOL_VERSION,
    serverInfo: { name: PACKAGE.product, title: 'mailroom', version: PACKAGE.version },
    description: PACKAGE.description,
    documentationUrl: `${config.publicUrl}/docs`,
    transport: { type: 'streamable-http', endpoint: `${config.publicUrl}/mcp` },
    capabilities: { tools: { listChanged: false } },
    authentication: {
      required: true,
      schemes: ['apiKey', 'oauth2'],
      apiKey: { in: 'header', name: 'X-API-KEY' },
      // MCP authorization (2025-11-25): discovered from the 401's WWW-Authenticate, or from here.
      oauth2: {
        protectedResourceMetadata: `${config.publicUrl}/.well-known/oauth-protected-resource/mcp`,
        authorizationServer: config.publicUrl,
        scopes: SCOPE_NAMES,
      },
    },
    instructions: MCP_INSTRUCTIONS,
    tools: mcpToolsOf(TOOLS),
  }
}

/**
 * RFC 9728 protected resource metadata: mailroom is its own authorization server, and takes its
 * access tokens in the Authorization header (or an API key in X-API-KEY, which OAuth does not describe).
 */
export function protectedResource(config: Pick<Config, 'publicUrl'>, resource: string) {
  return {
    resource,
    resource_name: 'mailroom',
    resource_documentation: `${config.publicUrl}/docs`,
    authorization_servers: [config.publicUrl],
    bearer_methods_supported: ['header'],
    scopes_supported: SCOPE_NAMES,
  }
}

/** RFC 9727 API catalog: a linkset that points at the descriptions, documentation and status. */
export function apiCatalog(config: Pick<Config, 'publicUrl'>) {
  const u = config.publicUrl
  return {
    linkset: [
      {
        anchor: `${u}/`,
        'service-desc': [
          { href: `${u}/spec/openapi.json`, type: 'application/vnd.oai.openapi+json' },
          { href: `${u}/spec/openapi.yaml`, type: 'application/vnd.oai.openapi' },
        ],
        'service-doc': [{ href: `${u}/docs`, type: 'text/html' }],
        'service-meta': [{ href: `${u}/.well-known/mcp/server.json`, type: 'application/json' }],
        status: [{ href: `${u}/ping`, type: 'text/plain' }],
      },
    ],
  }
}

const SWAGGER_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
const SWAGGER_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}
/**
 * The documentation page's script. The key typed into "Authorize" is kept in this tab only
 * (sessionStorage), as the console keeps it: swagger-ui's own persistAuthorization would keep it
 * in localStorage, where it outlives the tab and every page of the origin can read it.
 */
const DOCS_INIT = `const KEPT = 'mailroom.docs.authorized'
const keep = (system) => sessionStorage.setItem(KEPT, JSON.stringify(system.authSelectors.authorized().toJS()))
const keptAfter = (action, system) => (payload) => {
  const result = action(payload)
  keep(system)
  return result
}
const keepInTab = () => ({
  statePlugins: { auth: { wrapActions: { authorize: keptAfter, logout: keptAfter } } },
})
window.ui = SwaggerUIBundle({
  url: '../spec/openapi.json',
  dom_id: '#ui',
  deepLinking: true,
  plugins: [keepInTab],
  onComplete: () => {
    const authorized = sessionStorage.getItem(KEPT)
    if (authorized) window.ui.authActions.restoreAuthorization({ authorized: JSON.parse(authorized) })
  },
})
`

/** The documentation page cannot be framed (clickjacking its "Authorize"), as the console cannot. */
const DOCS_HEADERS = {
  'Content-Security-Policy': "frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
}

/** A plain HTML page, as every page the server serves is written: `title` and `body` already escaped. */
/**
 * Pages are never cached, framed (clickjacking) or given a referrer (the query holds the request).
 * No `form-action`: browsers apply it to the redirect that follows the form too, which goes to the client.
 */
export const PAGE_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
}

export const page = (title: string, body: string, head = '') =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
  `<title>${title}</title>${head}</head><body>${body}</body></html>`

/** `make()`'s value, made at the first call. */
function once<T>(make: () => T): () => T {
  let value: { v: T } | undefined
  return () => (value ??= { v: make() }).v
}

/** `/`, `/docs` (from the local swagger-ui-dist package, no CDN), the OpenAPI documents and the well-known documents. */
export function mountDocuments(app: Hono, config: Config): void {
  // Built at the first request that asks, then kept: generating them from every tool's schemas
  // takes longer than the rest of the app's setup, which every start and every test pays.
  const openapi = once(() => openApiDocument(config))
  const yaml = once(() => stringify(openapi(), { aliasDuplicateObjects: false }))
  const card = once(() => serverCard(config))
  const catalogLink = `<${config.publicUrl}/.well-known/api-catalog>; rel="api-catalog"`

  app.get('/spec/openapi.json', (c) => c.json(openapi()))
  app.get('/spec/openapi.yaml', (c) => c.body(yaml(), 200, { 'Content-Type': 'application/yaml; charset=utf-8' }))
  app.get('/.well-known/mcp/server.json', (c) => c.json(card()))
  app.get('/.well-known/mcp/server-card.json', (c) => c.json(card()))
  app.get('/.well-known/oauth-protected-resource', (c) => c.json(protectedResource(config, config.publicUrl)))
  app.get('/.well-known/oauth-protected-resource/mcp', (c) =>
    c.json(protectedResource(config, `${config.publicUrl}/mcp`)),
  )
  // GET and HEAD (Hono answers HEAD from the GET route, without the body).
  app.get('/.well-known/api-catalog', (c) =>
    c.body(JSON.stringify(apiCatalog(config)), 200, { 'Content-Type': 'application/linkset+json', Link: catalogLink }),
  )

  app.get('/docs', (c) => c.redirect('/docs/'))
  app.get('/docs/', (c) =>
    c.html(
      page(
        'mailroom API',
        '<div id="ui"></div><script src="swagger-ui-bundle.js"></script><script src="init.js"></script>',
        '<link rel="stylesheet" href="swagger-ui.css"><link rel="icon" href="favicon-32x32.png">',
      ),
      200,
      DOCS_HEADERS,
    ),
  )
  app.get('/docs/init.js', (c) => c.body(DOCS_INIT, 200, { 'Content-Type': 'text/javascript; charset=utf-8' }))
  app.get('/docs/:asset', (c) => {
    // Own keys only: `constructor` or `__proto__` is no asset.
    const asset = c.req.param('asset')
    const type = Object.hasOwn(SWAGGER_ASSETS, asset) ? SWAGGER_ASSETS[asset] : undefined
    if (!type) return c.notFound()
    return c.body(readFileSync(join(SWAGGER_DIR, asset)), 200, {
      'Content-Type': type,
      'Cache-Control': 'public, max-age=86400',
    })
  })

  app.get('/', (c) => {
    c.header('Link', catalogLink)
    const links = [
      ['/console', 'Console: the log, statistics, blocks, rules and SMTP settings (sign in with an API key)'],
      ['/docs/', 'Interactive API documentation'],
      ['/spec/openapi.json', 'OpenAPI (JSON)'],
      ['/spec/openapi.yaml', 'OpenAPI (YAML)'],
      ['/mcp', 'MCP endpoint (Streamable HTTP; send X-API-KEY, or authorize with OAuth)'],
      ['/.well-known/mcp/server.json', 'MCP server card'],
      ['/.well-known/api-catalog', 'API catalog (RFC 9727)'],
      ['/.well-known/oauth-protected-resource', 'Protected resource metadata (RFC 9728)'],
      ['/.well-known/oauth-authorization-server', 'OAuth authorization server metadata (RFC 8414)'],
      ['/ping', 'Health check'],
      ['/healthz', 'Liveness: the process answers (no key)'],
      ['/readyz', 'Readiness: the database can be written and delivery runs, else 503 (no key)'],
    ]
    return c.html(
      page(
        'mailroom',
        `<h1>mailroom ${PACKAGE.version}</h1><p>${PACKAGE.description}.</p><ul>` +
          links.map(([href, text]) => `<li><a href="${href}">${text}</a> <code>${href}</code></li>`).join('') +
          `</ul><p>Every REST operation is an MCP tool of the same name: ${TOOLS.map((t) => t.name).join(', ')}.</p>`,
      ),
    )
  })
}
