import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js'
import { rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { RunningServer } from '../../serve.js'
import { TOOLS } from '../../tools/index.js'
import { startTestServer } from '../helpers.js'
import { startSink } from '../relay/sink.js'
import { describeBrowser, launchChromium } from './chromium.js'

/** What an agent keeps between runs: the SDK asks it for its registration, tokens and PKCE verifier. */
class AgentProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed
  saved?: OAuthTokens
  verifier?: string
  /** Where the SDK sent the person, the last time. */
  authorizationUrl?: URL
  constructor(readonly redirectUrl: string) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Browser test agent',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }
  }
  clientInformation = () => this.client
  saveClientInformation = (info: OAuthClientInformationMixed) => void (this.client = info)
  tokens = () => this.saved
  saveTokens = (tokens: OAuthTokens) => void (this.saved = tokens)
  redirectToAuthorization = (url: URL) => void (this.authorizationUrl = url)
  saveCodeVerifier = (verifier: string) => void (this.verifier = verifier)
  codeVerifier = () => this.verifier!
}

// The MCP SDK's own client OAuth support against `mailroom serve`: discovery from the 401,
// Dynamic Client Registration, the authorization page answered in Chromium as a person would
// (with the keyboard), the code exchanged with PKCE, tools/list and a sendMail that reaches the
// sink, then a refresh.
describeBrowser('system: an MCP SDK client connected with OAuth, allowed in a browser', () => {
  let server: RunningServer
  let dataDir: string
  let apiKey: string
  let sink: Awaited<ReturnType<typeof startSink>>
  let browser: Browser
  let callback: Server
  let codes: string[]
  let callbackUrl: string
  let mcpUrl: URL

  beforeAll(async () => {
    sink = await startSink()
    const started = await startTestServer('mailroom-oauth-', { MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}` })
    ;({ server, dataDir, apiKey } = started)
    // The address the server names itself by (MAILROOM_PUBLIC_URL's default): the resource the SDK checks.
    mcpUrl = new URL(`http://localhost:${server.httpPort}/mcp`)
    codes = []
    // The agent's loopback redirect (RFC 8252 §7.3), where the browser brings the code back.
    callback = createServer((req, res) => {
      const url = new URL(req.url!, 'http://127.0.0.1')
      const code = url.searchParams.get('code')
      if (code) codes.push(code)
      res.setHeader('content-type', 'text/plain')
      res.end(code ? 'Authorized: you can close this window.' : `Not authorized: ${url.searchParams.get('error')}`)
    })
    await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve))
    callbackUrl = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`
    browser = await launchChromium()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await new Promise((resolve) => callback?.close(resolve))
    await server?.stop()
    await sink?.close()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  const connect = async (provider: AgentProvider) => {
    const client = new Client({ name: 'browser-test-agent', version: '1' })
    const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider })
    await client.connect(transport)
    return client
  }

  it('discovers, registers, is allowed in the browser, lists tools, sends mail and refreshes', async () => {
    const provider = new AgentProvider(callbackUrl)
    // No token yet: the 401's WWW-Authenticate leads the SDK to the metadata, a registration and
    // the authorization page, where it sends the person.
    const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider })
    await expect(new Client({ name: 'browser-test-agent', version: '1' }).connect(transport)).rejects.toThrow(
      /Unauthorized/,
    )
    expect(provider.client?.client_id).toMatch(/^mrcl_/)
    expect(provider.authorizationUrl?.searchParams.get('resource')).toBe(mcpUrl.href)
    expect(provider.authorizationUrl?.searchParams.get('code_challenge_method')).toBe('S256')

    // The person: reads who asks, signs in with the account's key, reads which account, allows.
    const page = await browser.newPage()
    await page.goto(provider.authorizationUrl!.href)
    const asking = await page.locator('main').textContent()
    expect(asking).toContain(`Browser test agent (${provider.client!.client_id}) asks to act for a mailroom account`)
    expect(asking).toContain('mail:send: send mail as the account')
    // The key field has the focus: typed, then Enter submits (Continue).
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('api_key')
    await page.keyboard.type(apiKey)
    await page.keyboard.press('Enter')
    await page.waitForSelector('text=Allow Browser test agent?')
    expect(await page.locator('main').textContent()).toContain('will act for the account')
    await page.getByRole('button', { name: 'Allow' }).focus()
    await page.keyboard.press('Enter')
    await page.waitForURL((url) => url.href.startsWith(callbackUrl))
    expect(await page.locator('body').textContent()).toBe('Authorized: you can close this window.')
    await page.close()
    expect(codes).toHaveLength(1)

    // The code exchanged with the verifier the SDK kept; then the agent works.
    await transport.finishAuth(codes[0])
    const first = provider.saved!
    expect(first).toMatchObject({ token_type: 'Bearer', scope: 'mail:read mail:send mail:manage' })
    const client = await connect(provider)
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toContain('sendMail')
    expect(tools).toHaveLength(TOOLS.length)
    const sent = await client.callTool({
      name: 'sendMail',
      arguments: { from: 'agent@example.org', to: 'person@example.com', subject: 'from an OAuth agent', body: 'hi' },
    })
    expect(sent.isError).toBeUndefined()
    await expect
      .poll(() => sink.messages.filter((m) => m.raw.toString().includes('Subject: from an OAuth agent')).length, {
        timeout: 15_000,
      })
      .toBe(1)
    await client.close()

    // A refresh: the SDK's auth() with a refresh token rotates it; the new access token works.
    expect(await auth(provider, { serverUrl: mcpUrl })).toBe('AUTHORIZED')
    expect(provider.saved!.refresh_token).not.toBe(first.refresh_token)
    expect(provider.saved!.access_token).not.toBe(first.access_token)
    const again = await connect(provider)
    expect((await again.listTools()).tools).toHaveLength(TOOLS.length)
    await again.close()
  }, 60_000)
})
