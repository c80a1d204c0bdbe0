import Database from 'better-sqlite3'
import { connect } from 'node:net'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { asMailroomError } from '../../errors.js'
import { BUDGET_RETRY_AFTER_S } from '../../relay/byte-budget.js'
import { failure, threadCalls } from '../../thread-calls.js'
import { SMALL_BODY_LIMIT } from '../../transports/request-body.js'
import { FORM_FIELD_LIMIT } from '../../transports/rest.js'
import { call, createTestEnv, serveApp, type TestEnv } from '../helpers.js'
import { expectNothingQueued, storedCounts } from '../tools/support.js'

const SEND = { to: 'bob@example.com', from: 'alice@example.org', subject: 'Hello', body: 'Hi Bob' }
const RAW = 'From: alice@example.org\r\nTo: bob@example.com\r\nSubject: raw\r\n\r\nHello\r\n'
// A small budget: one account may hold 100 KB of messages, all of them 200 KB.
const SMALL_BUDGET = {
  MAILROOM_HTTP_BODY_LIMIT: '100kb',
  MAILROOM_MAX_MESSAGE_SIZE: '100kb',
  MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '100kb',
  MAILROOM_MEMORY_BUDGET: '200kb',
}

/**
 * A body that records whether anything pulled it: with a high-water mark of 0, a stream is read
 * only when someone reads the request's body.
 */
function watchedBody(text: string, chunk = text.length) {
  const bytes = Buffer.from(text)
  let offset = 0
  const watch = { pulled: 0 }
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        watch.pulled++
        if (offset >= bytes.length) return controller.close()
        controller.enqueue(new Uint8Array(bytes.subarray(offset, offset + chunk)))
        offset += chunk
      },
    },
    { highWaterMark: 0 },
  )
  return { stream, watch }
}

/** A POST through app.request() whose body is watched; `declare` sends its Content-Length. */
function post(
  env: TestEnv,
  path: string,
  text: string,
  options: { declare?: boolean; key?: string | null; type?: string; chunk?: number } = {},
) {
  const { stream, watch } = watchedBody(text, options.chunk)
  const headers: Record<string, string> = { 'Content-Type': options.type ?? 'application/json', Accept: MCP_ACCEPT }
  if (options.key !== null) headers['X-API-KEY'] = options.key ?? env.apiKey
  if (options.declare !== false) headers['Content-Length'] = String(Buffer.byteLength(text))
  const res = env.app.request(path, { method: 'POST', headers, body: stream, duplex: 'half' } as RequestInit)
  return { res, watch }
}

const MCP_ACCEPT = 'application/json, text/event-stream'
const mcpCall = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } })

async function expectBudgetRefusal(res: Response) {
  expect(res.status).toBe(503)
  expect(res.headers.get('retry-after')).toBe(String(BUDGET_RETRY_AFTER_S))
  expect(await res.json()).toEqual({
    code: 503,
    message: `the server is holding too many message bytes; try again in ${BUDGET_RETRY_AFTER_S} s`,
  })
}

describe('the byte budget at the HTTP doors', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv(SMALL_BUDGET)
  })
  afterEach(() => env.close())
  const held = () => env.services.budget.held().total

  it.each([
    ['/mail/send', JSON.stringify(SEND)],
    ['/mail/advsend', JSON.stringify({ ...SEND, to: [{ email: 'bob@example.com' }] })],
    ['/mail/rawsend', JSON.stringify({ raw_email: RAW })],
    ['/mcp', mcpCall('sendMail', SEND)],
  ])('POST %s past the budget: 503 with Retry-After before its body is read; nothing stored', async (path, body) => {
    const other = env.services.budget.reserve(env.services.budget.limits.total - 10, null)!
    const { res, watch } = post(env, path, body)
    await expectBudgetRefusal(await res)
    expect(watch.pulled).toBe(0)
    expectNothingQueued(env)
    other.release()
    expect(held()).toBe(0)
  })

  it('counts each account on its own: one past its share is refused, another is served', async () => {
    const busy = env.services.budget.reserve(env.services.budget.limits.perAccount - 10, env.accountId)!
    await expectBudgetRefusal(await post(env, '/mail/send', JSON.stringify(SEND)).res)
    expectNothingQueued(env)
    const other = await env.newAccount()
    const { res } = post(env, '/mail/send', JSON.stringify(SEND), { key: other.apiKey })
    expect((await res).status).toBe(200)
    expect(storedCounts(env).messages).toBe(1)
    busy.release()
    expect(held()).toBe(0)
  })

  it('grows the reservation of a body of unknown length as it arrives, and refuses it once it cannot', async () => {
    const other = env.services.budget.reserve(env.services.budget.limits.total - 4096, null)!
    const big = JSON.stringify({ ...SEND, body: 'x'.repeat(20_000) })
    const { res, watch } = post(env, '/mail/send', big, { declare: false, chunk: 1024 })
    await expectBudgetRefusal(await res)
    // It stopped reading at the chunk that did not fit.
    expect(watch.pulled).toBeLessThan(big.length / 1024)
    expectNothingQueued(env)
    other.release()
    expect(held()).toBe(0)
    const small = post(env, '/mail/send', JSON.stringify(SEND), { declare: false, chunk: 16 })
    expect((await small.res).status).toBe(200)
    expect(held()).toBe(0)
  })

  it('releases the reservation whatever the answer: sent, refused by the tool, or bad JSON', async () => {
    expect((await post(env, '/mail/send', JSON.stringify(SEND)).res).status).toBe(200)
    expect(held()).toBe(0)
    expect((await post(env, '/mail/send', JSON.stringify({ ...SEND, to: 'nobody' })).res).status).toBe(400)
    expect(held()).toBe(0)
    expect((await post(env, '/mail/send', '{"to":').res).status).toBe(400)
    expect(held()).toBe(0)
    expect((await post(env, '/mcp', mcpCall('sendMail', SEND)).res).status).toBe(200)
    expect(held()).toBe(0)
  })

  it("releases an MCP session's reservation once its call has answered", async () => {
    const headers = { 'X-API-KEY': env.apiKey, 'Content-Type': 'application/json', Accept: MCP_ACCEPT }
    const init = await env.app.request('/mcp', {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    })
    const session = { 'Mcp-Session-Id': init.headers.get('mcp-session-id')!, 'Mcp-Protocol-Version': '2025-06-18' }
    await init.text()
    const res = await env.app.request('/mcp', {
      method: 'POST',
      headers: { ...headers, ...session },
      body: mcpCall('sendMail', SEND),
    })
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await res.text()).toContain('"status\\":\\"ok\\"')
    expect(held()).toBe(0)
    expect(storedCounts(env).messages).toBe(1)
  })

  it('reads no body of a request without a valid key', async () => {
    for (const key of [null, 'mr_wrong']) {
      const { res, watch } = post(env, '/mail/rawsend', JSON.stringify({ raw_email: RAW }), { key })
      expect((await res).status).toBe(401)
      expect(watch.pulled).toBe(0)
    }
    const { res, watch } = post(env, '/mcp', mcpCall('sendMail', SEND), { key: null })
    expect((await res).status).toBe(401)
    expect(watch.pulled).toBe(0)
    expectNothingQueued(env)
  })

  describe('over a real socket', () => {
    let server: Awaited<ReturnType<typeof serveApp>>
    beforeEach(async () => void (server = await serveApp(env.app)))
    afterEach(() => server.close())

    /**
     * Sends a request's headers and `body` (none by default) and resolves with what comes back
     * once the server closes the connection: the answer must not wait for a body never sent.
     */
    const exchange = (head: string[], body = '') =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(server.port, '127.0.0.1')
        let answer = ''
        socket.on('data', (d) => (answer += d))
        socket.on('close', () => resolve(answer))
        socket.on('error', reject)
        socket.write(`${[...head, `Host: 127.0.0.1:${server.port}`].join('\r\n')}\r\n\r\n${body}`)
      })

    it('answers 503 from the headers alone, then drops the body it never reads and keeps the connection', async () => {
      const other = env.services.budget.reserve(env.services.budget.limits.total - 10, null)!
      const socket = connect(server.port, '127.0.0.1')
      let answer = ''
      socket.on('data', (d) => (answer += d))
      const body = JSON.stringify({ raw_email: RAW.repeat(1000) })
      socket.write(
        `POST /mail/rawsend HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${env.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      )
      // Answered before a byte of the body was sent.
      await vi.waitFor(() => expect(answer).toContain('the server is holding too many message bytes'), {
        timeout: 30_000,
        interval: 20,
      })
      expect(answer).toMatch(/^HTTP\/1\.1 503 /)
      expect(answer).toMatch(new RegExp(`\r\nretry-after: ${BUDGET_RETRY_AFTER_S}\r\n`, 'i'))
      expect(answer).not.toMatch(/\r\nconnection: close\r\n/i)
      // The body sent anyway is read and dropped; the connection then takes the next request.
      answer = ''
      socket.write(`${body}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`)
      await vi.waitFor(() => expect(answer).toMatch(/^HTTP\/1\.1 200 [\s\S]*"status":"ok"/), {
        timeout: 30_000,
        interval: 20,
      })
      socket.destroy()
      expect(held()).toBe(env.services.budget.limits.total - 10)
      other.release()
      expectNothingQueued(env)
    })

    it('answers 401 to a message without a key from the headers alone, and closes the connection', async () => {
      const answer = await exchange(['POST /mcp HTTP/1.1', 'Content-Type: application/json', 'Content-Length: 90000'])
      expect(answer).toMatch(/^HTTP\/1\.1 401 /)
      expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    })

    it('releases the reservation of a client that goes away mid-body', async () => {
      const socket = connect(server.port, '127.0.0.1')
      socket.write(
        `POST /mail/send HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${env.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 90000\r\n\r\n{"to":`,
      )
      await vi.waitFor(() => expect(held()).toBe(90000), { timeout: 30_000, interval: 20 })
      socket.destroy()
      await vi.waitFor(() => expect(held()).toBe(0), { timeout: 30_000, interval: 20 })
      expectNothingQueued(env)
    })

    it.each(['/oauth/register', '/oauth/token', '/oauth/authorize', '/mail/rules'])(
      'refuses a 40 MB body to %s with 413 from its Content-Length, before reading it',
      async (path) => {
        const answer = await exchange([
          `POST ${path} HTTP/1.1`,
          `X-API-KEY: ${env.apiKey}`,
          'Content-Type: application/x-www-form-urlencoded',
          `Content-Length: ${40 * 1024 * 1024}`,
        ])
        expect(answer).toMatch(/^HTTP\/1\.1 413 /)
        expect(answer).toContain(`"message":"the request body is larger than ${SMALL_BODY_LIMIT} bytes"`)
        expect(answer).toMatch(/\r\nconnection: close\r\n/i)
      },
    )

    it('counts a chunked body to a small route: 413 past the small limit', async () => {
      const chunk = 'a'.repeat(16 * 1024)
      const chunks = Array.from({ length: 5 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('')
      const answer = await exchange(
        ['POST /oauth/register HTTP/1.1', 'Content-Type: application/json', 'Transfer-Encoding: chunked'],
        `${chunks}0\r\n\r\n`,
      )
      expect(answer).toMatch(/^HTTP\/1\.1 413 /)
      const sqlite = (env.services.store as unknown as { sqlite: Database.Database }).sqlite
      expect(sqlite.prepare('SELECT COUNT(*) AS n FROM oauth_clients').get()).toEqual({ n: 0 })
    })
  })
})

describe('many large bodies at once over a real socket', () => {
  let env: TestEnv
  let server: Awaited<ReturnType<typeof serveApp>>
  beforeEach(async () => {
    env = await createTestEnv({
      MAILROOM_HTTP_BODY_LIMIT: '8mb',
      MAILROOM_MAX_MESSAGE_SIZE: '8mb',
      MAILROOM_MEMORY_BUDGET_PER_ACCOUNT: '8mb',
      MAILROOM_MEMORY_BUDGET: '16mb',
    })
    server = await serveApp(env.app)
  })
  afterEach(async () => {
    await server.close()
    await env.close()
  })

  it('answers every one of many clients uploading at once 200 or 503, and stores each 200', async () => {
    // Each body is most of what the account may hold: one at a time is taken, the others told
    // to wait, while they are still sending bodies larger than the sockets' buffers.
    const raw = `${RAW}${'x'.repeat(6 * 1024 * 1024)}\r\n`
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        fetch(`http://127.0.0.1:${server.port}/mail/rawsend`, {
          method: 'POST',
          headers: { 'X-API-KEY': env.apiKey, 'Content-Type': 'application/json' },
          body: JSON.stringify({ raw_email: raw }),
        }).then(
          (res) => res.status,
          (err: Error) => `${err.message}: ${(err.cause as Error | undefined)?.message}`,
        ),
      ),
    )
    expect(answers.filter((a) => a !== 200 && a !== 503)).toEqual([])
    expect(answers).toContain(200)
    expect(storedCounts(env).messages).toBe(answers.filter((a) => a === 200).length)
    expect(env.services.budget.held().total).toBe(0)
  })
})

describe('bodies that cannot be read as they are', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv()
  })
  afterEach(() => env.close())

  const fields = (n: number) => Array.from({ length: n }, (_, i) => `x${i}=1`).join('&')
  const tooMany = new RegExp(`more than ${FORM_FIELD_LIMIT} fields`)

  it(`refuses a form of more than ${FORM_FIELD_LIMIT} fields instead of dropping the rest`, async () => {
    const form = `${new URLSearchParams(SEND)}&${fields(FORM_FIELD_LIMIT)}&bcc[0][email]=carol@example.com`
    const res = await call(env, 'POST', '/mail/advsend', form, { contentType: 'application/x-www-form-urlencoded' })
    expect(res.status).toBe(400)
    expect((await res.json()).message).toMatch(tooMany)
    expectNothingQueued(env)
  })

  it(`refuses a list of more than ${FORM_FIELD_LIMIT} items in a form`, async () => {
    const to = Array.from({ length: FORM_FIELD_LIMIT + 1 }, (_, i) => `to[${i}][email]=b${i}@example.com`).join('&')
    const res = await call(env, 'POST', '/mail/advsend', `from=alice@example.org&subject=s&body=b&${to}`, {
      contentType: 'application/x-www-form-urlencoded',
    })
    expect(res.status).toBe(400)
    expect((await res.json()).message).toMatch(tooMany)
    expectNothingQueued(env)
  })

  it(`refuses multipart of more than ${FORM_FIELD_LIMIT} fields`, async () => {
    const fd = new FormData()
    for (const [k, v] of Object.entries(SEND)) fd.set(k, v)
    for (let i = 0; i < FORM_FIELD_LIMIT; i++) fd.set(`x${i}`, '1')
    fd.set('bcc[0][email]', 'carol@example.com')
    const res = await call(env, 'POST', '/mail/advsend', fd)
    expect(res.status).toBe(400)
    expect((await res.json()).message).toMatch(tooMany)
    expectNothingQueued(env)
  })

  it('still takes a form of many fields within the limit', async () => {
    const form = `${new URLSearchParams(SEND)}&${fields(FORM_FIELD_LIMIT - 10)}`
    const res = await call(env, 'POST', '/mail/send', form, { contentType: 'application/x-www-form-urlencoded' })
    expect(res.status).toBe(200)
  })

  const invalidUtf8 = Buffer.concat([
    Buffer.from('{"to":"bob@example.com","from":"alice@example.org","body":"'),
    Buffer.from([0xc3, 0x28]),
    Buffer.from('"}'),
  ])
  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(SEND))])

  it.each([
    ['invalid UTF-8', invalidUtf8],
    ['a byte-order mark', withBom],
  ])('refuses JSON with %s as not valid JSON, over REST', async (_, bytes) => {
    for (const type of ['application/json', 'application/x-www-form-urlencoded']) {
      const res = await env.app.request('/mail/send', {
        method: 'POST',
        headers: { 'X-API-KEY': env.apiKey, 'Content-Type': type },
        body: new Uint8Array(bytes),
      })
      expect(res.status).toBe(400)
      expect(await res.json()).toEqual({ code: 400, message: 'the request body is not valid JSON' })
    }
    expectNothingQueued(env)
  })

  it.each([
    [
      'invalid UTF-8',
      Buffer.concat([Buffer.from(mcpCall('sendMail', SEND).slice(0, -3)), Buffer.from([0xff]), Buffer.from('}}}')]),
    ],
    ['a byte-order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(mcpCall('sendMail', SEND))])],
  ])('refuses JSON with %s as not valid JSON, over MCP', async (_, bytes) => {
    const res = await env.app.request('/mcp', {
      method: 'POST',
      headers: {
        'X-API-KEY': env.apiKey,
        'Content-Type': 'application/json',
        Accept: MCP_ACCEPT,
      },
      body: new Uint8Array(bytes),
    })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error: the request body is not valid JSON' },
      id: null,
    })
    expectNothingQueued(env)
  })
})

describe('a full disk', () => {
  let env: TestEnv
  beforeEach(async () => {
    env = await createTestEnv()
  })
  afterEach(() => env.close())

  it.each([
    ['SQLITE_FULL', 503],
    ['ENOSPC', 503],
    ['53100', 503], // PostgreSQL's disk_full
    ['SQLITE_BUSY', 500],
    [undefined, 500],
  ])('maps a store error with code %s to %i', (code, status) => {
    const e = asMailroomError(Object.assign(new Error('x'), code ? { code } : {}))
    expect(e.code).toBe(status)
    if (status === 503) expect(e.headers).toEqual({ 'Retry-After': '60' })
  })

  it('keeps the code of an error that crosses from the engine thread', async () => {
    const calls = threadCalls()
    const pending = calls.call(() => undefined)
    calls.settle(failure(0, new Database.SqliteError('database or disk is full', 'SQLITE_FULL')))
    await expect(pending).rejects.toMatchObject({ message: 'database or disk is full', code: 'SQLITE_FULL' })
  })

  /** Lets the database grow no further: SQLite itself then fails the next write with SQLITE_FULL. */
  const fillDisk = () => {
    const sqlite = (env.services.store as unknown as { sqlite: Database.Database }).sqlite
    const pages = sqlite.pragma('page_count', { simple: true }) as number
    sqlite.pragma(`max_page_count = ${pages}`)
  }
  const big = { ...SEND, body: 'x'.repeat(200_000) }

  it('answers a REST send 503 with Retry-After, and stores nothing', async () => {
    fillDisk()
    const res = await call(env, 'POST', '/mail/send', big)
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('60')
    expect((await res.json()).message).toMatch(/disk is full; try again in 60 s/)
    expectNothingQueued(env)
  })

  it('answers an MCP send with a 503 error result', async () => {
    fillDisk()
    const res = await env.app.request('/mcp', {
      method: 'POST',
      headers: { 'X-API-KEY': env.apiKey, 'Content-Type': 'application/json', Accept: MCP_ACCEPT },
      body: mcpCall('sendMail', big),
    })
    const body = await res.json()
    expect(body.result.isError).toBe(true)
    expect(JSON.parse(body.result.content[0].text)).toEqual({
      code: 503,
      message: expect.stringMatching(/disk is full; try again in 60 s/),
    })
    expectNothingQueued(env)
  })
})
