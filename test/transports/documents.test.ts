import Ajv from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { loadUpstream } from '../openapi.js'

const UPSTREAM = loadUpstream() as unknown as Doc
/** The operations that take an Idempotency-Key. */
const SENDS = ['sendMail', 'sendAdvMail', 'rawMail']
const METHODS = ['get', 'post', 'delete', 'put', 'patch'] as const

type Doc = { paths: Record<string, Record<string, any>>; components: any }

/** Resolves local $refs of an OpenAPI 3.0 document and turns `nullable` into JSON Schema. */
function toJsonSchema(doc: Doc, schema: any, depth = 0): any {
  if (depth > 40 || schema === null || typeof schema !== 'object') return schema
  if (Array.isArray(schema)) return schema.map((s) => toJsonSchema(doc, s, depth + 1))
  if (schema.$ref)
    return toJsonSchema(
      doc,
      schema.$ref
        .slice(2)
        .split('/')
        .reduce((o: any, k: string) => o[k], doc),
      depth + 1,
    )
  const out: any = {}
  for (const [k, v] of Object.entries(schema))
    if (!['example', 'examples', 'x-enum-varnames', 'discriminator'].includes(k))
      out[k] = toJsonSchema(doc, v, depth + 1)
  // OpenAPI 3.0 (draft 4) writes exclusive bounds as booleans.
  if (out.exclusiveMinimum === true) (out.exclusiveMinimum = out.minimum), delete out.minimum
  if (out.exclusiveMaximum === true) (out.exclusiveMaximum = out.maximum), delete out.maximum
  if (out.nullable) {
    delete out.nullable
    return { anyOf: [out, { type: 'null' }] }
  }
  return out
}

const ajv = new Ajv({ strict: false, validateFormats: false })
const valid = (doc: Doc, schema: any, value: unknown) => {
  const validate = ajv.compile(toJsonSchema(doc, schema))
  return validate(value) ? '' : ajv.errorsText(validate.errors)
}

describe('discovery documents', () => {
  let env: TestEnv
  let ours: Doc
  beforeAll(async () => {
    env = await createTestEnv({ MAILROOM_PUBLIC_URL: 'https://mail.example.com' })
    ours = await (await env.app.request('/spec/openapi.json')).json()
  })
  afterAll(() => env.close())

  const upstreamOps = Object.entries(UPSTREAM.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ path, method: m, op: item[m] })),
  )

  it('lists 503 (try later: the byte budget, a full disk) for the sends, and only for them', () => {
    const with503 = Object.entries(ours.paths).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]?.responses?.['503']).map((m) => `${m.toUpperCase()} ${path}`),
    )
    expect(with503.sort()).toEqual([
      'POST /inbound/{id}/reply',
      'POST /mail/advsend',
      'POST /mail/rawsend',
      'POST /mail/send',
    ])
    expect(ours.components.responses.E503.description).toMatch(/Retry-After/)
  })

  it('has every upstream operation, same paths, methods and operationIds; extensions only at other paths', () => {
    const upstreamIds = new Set(upstreamOps.map((o) => o.op.operationId))
    const mine = Object.entries(ours.paths).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => ({
        path,
        line: `${m.toUpperCase()} ${path} ${item[m].operationId}`,
        id: item[m].operationId,
      })),
    )
    expect(
      mine
        .filter((o) => upstreamIds.has(o.id))
        .map((o) => o.line)
        .sort(),
    ).toEqual(upstreamOps.map((o) => `${o.method.toUpperCase()} ${o.path} ${o.op.operationId}`).sort())
    // The extensions (webhooks, a message's story, volume) are beside the contract, never on one of its paths.
    const extensions = mine.filter((o) => !upstreamIds.has(o.id))
    expect(extensions.map((o) => o.id).sort()).toEqual([
      'addInbox',
      'addWebhook',
      'approveMessage',
      'cancelMailOrder',
      'checkDomain',
      'createApiKey',
      'createMailOrder',
      'deleteInbox',
      'deleteWebhook',
      'getApiKeys',
      'getApprovals',
      'getAttachment',
      'getDomains',
      'getInboundMessage',
      'getInboxes',
      'getMessage',
      'getMessageContent',
      'getSendPolicy',
      'getSuppressions',
      'getThread',
      'getVolume',
      'getWebhooks',
      'listInboundMessages',
      'markInboundRead',
      'rejectMessage',
      'replyToMessage',
      'revokeApiKey',
      'rotateOrderPassword',
      'setDomainReceiving',
    ])
    for (const o of extensions) expect(UPSTREAM.paths[o.path], o.line).toBeUndefined()
  })

  describe.each(upstreamOps)('$op.operationId', ({ path, method, op }) => {
    const mine = () => ours.paths[path][method]

    it('takes the same parameters, in the same places (the sends also an Idempotency-Key header)', () => {
      const theirs = [
        ...(op.parameters ?? []).map((p: any) => `${p.in}:${p.name}:${p.in === 'path' ? 'required' : 'optional'}`),
        // Our one addition, optional: the contract's clients work unchanged.
        ...(SENDS.includes(op.operationId) ? ['header:Idempotency-Key:optional'] : []),
      ].sort()
      const ourParams = (mine().parameters ?? [])
        .map((p: any) => `${p.in}:${p.name}:${p.required ? 'required' : 'optional'}`)
        .sort()
      expect(ourParams).toEqual(theirs)
      // Every upstream example value of a parameter is valid for our schema of it.
      for (const p of op.parameters ?? []) {
        const ourSchema = mine().parameters.find((q: any) => q.name === p.name).schema
        if (p.example !== undefined) expect(valid(ours, ourSchema, p.example), p.name).toBe('')
      }
    })

    it('accepts the upstream request body content types and examples', () => {
      if (!op.requestBody) return expect(mine().requestBody).toBeUndefined()
      for (const [type, media] of Object.entries(op.requestBody.content as Record<string, any>)) {
        const ourMedia = mine().requestBody.content[type]
        expect(ourMedia, type).toBeDefined()
        const examples = [
          ...Object.values(media.examples ?? {}).map((e: any) => e.value),
          ...(media.schema?.$ref ? [toJsonSchema(UPSTREAM, media.schema).example].filter(Boolean) : []),
        ]
        for (const example of examples) expect(valid(ours, ourMedia.schema, example), JSON.stringify(example)).toBe('')
      }
    })

    it('answers every upstream status, and its examples fit our response schemas', () => {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        if (status === 'default') continue
        expect(mine().responses[status], status).toBeDefined()
        if (status !== '200') continue
        for (const [type, media] of Object.entries((response.content ?? {}) as Record<string, any>)) {
          const ourMedia = mine().responses['200'].content[type]
          expect(ourMedia, type).toBeDefined()
          for (const e of Object.values(media.examples ?? {}) as any[])
            expect(valid(ours, ourMedia.schema, e.value), JSON.stringify(e.value).slice(0, 200)).toBe('')
        }
      }
    })
  })

  it('serves the same document as YAML', async () => {
    const res = await env.app.request('/spec/openapi.yaml')
    expect(res.headers.get('content-type')).toContain('yaml')
    expect(parse(await res.text())).toEqual(ours)
    expect(ours.servers).toEqual([{ url: 'https://mail.example.com' }])
  })

  it('serves the MCP server card at both names', async () => {
    const card = await (await env.app.request('/.well-known/mcp/server.json')).json()
    expect(await (await env.app.request('/.well-known/mcp/server-card.json')).json()).toEqual(card)
    expect(card).toMatchObject({
      version: '1.0.0',
      protocolVersion: '2025-06-18',
      transport: { type: 'streamable-http', endpoint: 'https://mail.example.com/mcp' },
      authentication: { required: true, apiKey: { in: 'header', name: 'X-API-KEY' } },
      capabilities: { tools: { listChanged: false } },
    })
    expect(card.tools.map((t: { name: string }) => t.name)).toEqual(
      expect.arrayContaining(upstreamOps.map((o) => o.op.operationId)),
    )
  })

  it('serves RFC 9728 protected resource metadata', async () => {
    expect(await (await env.app.request('/.well-known/oauth-protected-resource')).json()).toMatchObject({
      resource: 'https://mail.example.com',
    })
    expect(await (await env.app.request('/.well-known/oauth-protected-resource/mcp')).json()).toMatchObject({
      resource: 'https://mail.example.com/mcp',
    })
  })

  it('serves an RFC 9727 API catalog, also to HEAD with a Link header', async () => {
    const res = await env.app.request('/.well-known/api-catalog')
    expect(res.headers.get('content-type')).toBe('application/linkset+json')
    const catalog = await res.json()
    expect(catalog.linkset[0]['service-desc'][0].href).toBe('https://mail.example.com/spec/openapi.json')
    const head = await env.app.request('/.well-known/api-catalog', { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(head.headers.get('link')).toBe('<https://mail.example.com/.well-known/api-catalog>; rel="api-catalog"')
    expect(await head.text()).toBe('')
  })

  it('serves interactive documentation from local assets only', async () => {
    const html = await (await env.app.request('/docs/')).text()
    expect(html).toContain('swagger-ui-bundle.js')
    expect(html).not.toMatch(/https?:\/\//)
    for (const asset of ['swagger-ui-bundle.js', 'swagger-ui.css', 'init.js']) {
      const res = await env.app.request(`/docs/${asset}`)
      expect(res.status, asset).toBe(200)
      expect((await res.arrayBuffer()).byteLength, asset).toBeGreaterThan(20)
    }
    expect((await env.app.request('/docs/package.json')).status).toBe(404)
    for (const inherited of ['constructor', '__proto__', 'toString'])
      expect((await env.app.request(`/docs/${inherited}`)).status).toBe(404)
    expect(await (await env.app.request('/docs/init.js')).text()).toContain('../spec/openapi.json')
  })

  it('serves the documentation page so that no other site can frame it', async () => {
    const res = await env.app.request('/docs/')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(res.headers.get('x-frame-options')).toBe('DENY')
    // The key typed into "Authorize" is kept in the tab (sessionStorage), not by swagger-ui in localStorage.
    const init = await (await env.app.request('/docs/init.js')).text()
    expect(init).not.toContain('persistAuthorization')
    expect(init).toContain('sessionStorage')
  })

  it('links everything from GET /', async () => {
    const html = await (await env.app.request('/')).text()
    for (const href of [
      '/docs/',
      '/spec/openapi.json',
      '/spec/openapi.yaml',
      '/mcp',
      '/.well-known/mcp/server.json',
      '/.well-known/api-catalog',
      '/.well-known/oauth-protected-resource',
    ]) {
      expect(html).toContain(`href="${href}"`)
      if (href !== '/mcp') expect((await env.app.request(href)).status, href).toBe(200)
    }
  })
})
