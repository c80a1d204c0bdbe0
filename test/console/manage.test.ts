import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ConsoleEnv,
  describeChromium,
  loaded,
  newPage,
  screenshot,
  signIn,
  startConsole,
  VIEWPORTS,
} from './browser.js'
import { DOMAIN, startDomainDns } from './domains.js'

// The pages and actions that run the service (keys, orders, webhooks, domains) and a message's
// content, in Chromium at a laptop's and a phone's width, each checked against the API.
describeChromium('console: keys, orders, webhooks, domains and content', () => {
  let env: ConsoleEnv
  let dns: Awaited<ReturnType<typeof startDomainDns>>
  // Where the hostile message's script and image would call: nothing may reach it.
  const probe = { hits: [] as string[], url: '' }
  const probeServer = createServer((req, res) => {
    probe.hits.push(req.url ?? '')
    res.end()
  })
  beforeAll(async () => {
    dns = await startDomainDns()
    env = await startConsole([], { env: dns.env, setup: dns.setup })
    await new Promise<void>((resolve) => probeServer.listen(0, '127.0.0.1', resolve))
    probe.url = `http://127.0.0.1:${(probeServer.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await env?.close()
    dns?.stop()
    probeServer.close()
  })

  describe.each(VIEWPORTS)('at $name', ({ name, viewport, isMobile }) => {
    const open = async (path: string, key = env.apiKey) => {
      const session = await newPage(env, { viewport, isMobile })
      await signIn(session.page, env.base, key)
      await session.page.goto(`${env.base}${path}`)
      await loaded(session.page)
      return session
    }
    const shot = (page: Page, what: string) => screenshot(page, `${what}-${viewport.width}`)
    const revealed = async (page: Page, id: string) => (await page.locator(`#${id} code`).textContent())!
    const confirm = async (page: Page, button: string) => {
      await page.getByRole('dialog').waitFor()
      await page.getByRole('dialog').getByRole('button', { name: button }).click()
    }

    it('API keys: creates one, shown once, that works; revokes it after asking', async () => {
      const { context, page, problems } = await open('/console/keys')
      await page.getByRole('button', { name: 'Create key' }).click()
      await page.locator('#new-key code').waitFor()
      const key = await revealed(page, 'new-key')
      expect((await env.api('GET', '/mail', undefined, key)).status).toBe(200)
      const made = (await env.api('GET', '/keys')).body.at(-1)
      expect(key.startsWith(made.prefix)).toBe(true)
      await page.getByRole('button', { name: `Revoke key ${made.id}` }).waitFor()
      await shot(page, 'keys')
      await page.getByRole('button', { name: `Revoke key ${made.id}` }).click()
      await confirm(page, 'Revoke')
      await page
        .getByRole('status')
        .filter({ hasText: `Key ${made.id} was revoked.` })
        .waitFor()
      expect((await env.api('GET', '/mail', undefined, key)).status).toBe(401)
      // Shown once: not after the page is loaded again.
      await page.reload()
      await page.getByRole('button', { name: 'Revoke key 1' }).waitFor()
      expect(await page.content()).not.toContain(key)
      expect(problems()).toEqual([])
      await context.close()
    })

    it('API keys: a sandbox key is refused a real key, with the reason, and nothing is made', async () => {
      const before = (await env.api('GET', '/keys')).body.length
      const sandbox = await open('/console/keys', env.sandboxKey)
      await sandbox.page.getByRole('button', { name: 'Create key' }).click()
      const alert = sandbox.page.getByRole('alert').filter({ hasText: 'sandbox' })
      await alert.waitFor()
      expect(await alert.textContent()).toBe('sandbox: not created: a sandbox key may create sandbox keys only')
      expect((await env.api('GET', '/keys')).body).toHaveLength(before)
      expect(sandbox.problems()).toEqual([])
      await sandbox.context.close()
    })

    it('Orders: creates one with its password shown once, replaces the password, cancels it after asking', async () => {
      const { context, page, problems } = await open('/console/orders')
      const form = page.locator('#add-order')
      await form.getByLabel('Comment').fill(`made at ${name}`)
      await form.getByLabel('Authorized senders').fill('me@example.org, @example.net')
      await form.getByRole('button', { name: 'Create order' }).click()
      await page.locator('#new-order-password code').waitFor()
      const created = (await env.api('GET', '/mail')).body.at(-1)
      expect(created).toMatchObject({ status: 'active', comment: `made at ${name}` })
      const password = await revealed(page, 'new-order-password')
      expect((await env.api('GET', `/mail/${created.id}`)).body.password).toBe(password)
      expect(await page.locator('#new-order-password').textContent()).toContain(`${created.username} was created`)

      await page.getByRole('button', { name: `Replace password of ${created.username}` }).click()
      await confirm(page, 'Replace')
      await page.locator('#new-order-password').filter({ hasText: 'The new password' }).waitFor()
      const replaced = await revealed(page, 'new-order-password')
      expect(replaced).not.toBe(password)
      expect((await env.api('GET', `/mail/${created.id}`)).body.password).toBe(replaced)
      await shot(page, 'orders-manage')

      await page.getByRole('button', { name: `Cancel order ${created.username}` }).click()
      await confirm(page, 'Cancel order')
      await page
        .getByRole('status')
        .filter({ hasText: `${created.username} was canceled.` })
        .waitFor()
      expect((await env.api('GET', `/mail/${created.id}`)).body.status).toBe('canceled')
      expect(await page.getByRole('button', { name: `Cancel order ${created.username}` }).count()).toBe(0)
      expect(problems()).toEqual([])
      await context.close()
    })

    it('Orders: a sandbox key is refused a real order and cancelling one, with the reason; nothing changes', async () => {
      const count = (await env.api('GET', '/mail')).body.length
      const sandbox = await open('/console/orders', env.sandboxKey)
      await sandbox.page.getByRole('button', { name: 'Create order' }).click()
      const alert = sandbox.page.getByRole('alert').filter({ hasText: 'not created' })
      await alert.waitFor()
      expect(await alert.textContent()).toMatch(
        /^not created: the password sends real mail, and this caller is a sandbox key/,
      )
      await sandbox.page.getByRole('button', { name: 'Cancel order mb1' }).click()
      await confirm(sandbox.page, 'Cancel order')
      await sandbox.page.getByRole('alert').filter({ hasText: 'may cancel sandbox orders only' }).waitFor()
      expect((await env.api('GET', '/mail')).body).toHaveLength(count)
      expect((await env.api('GET', '/mail/1')).body.status).toBe('active')
      expect(sandbox.problems()).toEqual([])
      await sandbox.context.close()
    })

    it('Webhooks: adds one with its secret shown once, shows what the API refuses, deletes one after asking', async () => {
      const { context, page, problems } = await open('/console/webhooks')
      const form = page.locator('#add-webhook')
      await form.getByLabel('URL').fill(`https://hooks.example.com/${viewport.width}`)
      await form.getByLabel('message.accepted').uncheck()
      await form.getByLabel('message.deferred').uncheck()
      await form.getByRole('button', { name: 'Add webhook' }).click()
      await page.locator('#webhook-secret code').waitFor()
      const secret = await revealed(page, 'webhook-secret')
      expect(secret).toMatch(/^whsec_/)
      const hook = (await env.api('GET', '/webhooks')).body.at(-1)
      expect(hook).toMatchObject({
        url: `https://hooks.example.com/${viewport.width}`,
        events: [
          'message.delivered',
          'message.failed',
          'message.refused',
          'message.received',
          'message.held',
          'message.approved',
          'message.rejected',
          'recipient.unsubscribed',
          'recipient.complained',
        ],
      })
      await page.locator('#webhooks tbody tr').filter({ hasText: hook.url }).waitFor()
      await shot(page, 'webhooks')

      const stored = (await env.api('GET', '/webhooks')).body.length
      await form.getByLabel('URL').fill('http://127.0.0.1:9/hook')
      await form.getByRole('button', { name: 'Add webhook' }).click()
      await page.getByRole('alert').filter({ hasText: 'url:' }).waitFor()
      expect((await env.api('GET', '/webhooks')).body).toHaveLength(stored)

      await page.getByRole('button', { name: `Delete webhook ${hook.id}` }).click()
      await confirm(page, 'Delete')
      await page
        .getByRole('status')
        .filter({ hasText: `Webhook ${hook.id} was deleted.` })
        .waitFor()
      expect((await env.api('GET', '/webhooks')).body.map((w: { id: number }) => w.id)).not.toContain(hook.id)
      expect(problems()).toEqual([])
      await context.close()
    })

    it('Domains: the records to publish, each with a Copy button; Check says which are published', async () => {
      const { context, page, problems } = await open('/console/domains')
      const { records } = (await env.api('GET', '/domains')).body[0]
      const card = page.locator('.card').filter({ has: page.getByRole('heading', { name: DOMAIN }) })
      expect(await card.locator('.records-list code:not(.name)').allTextContents()).toEqual(
        records.map((r: { value: string }) => r.value),
      )
      await card.getByRole('button', { name: `Check the records of ${DOMAIN}` }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `Some records of ${DOMAIN} are not published yet.` })
        .waitFor()
      expect(await card.locator('.check').allTextContents()).toEqual(['Published', 'Published', 'Missing'])
      await shot(page, 'domains')
      expect(problems()).toEqual([])
      await context.close()
    })

    it("a message's content: text, sanitized HTML in a sandboxed frame where nothing runs or loads, and source", async () => {
      const hostile =
        `<p>Hello <b>reader</b></p><script>fetch('${probe.url}/script')</script>` +
        `<img src="${probe.url}/pixel" onerror="fetch('${probe.url}/onerror')" alt="logo">` +
        `<a href="javascript:fetch('${probe.url}/link')">click</a><style>p{color:red}</style>`
      const sent = await env.api('POST', '/mail/send', {
        from: 'me@example.org',
        to: 'later@example.com',
        subject: `Content ${viewport.width}`,
        body: hostile,
      })
      const { context, page, problems } = await open(`/console/log?mailid=${sent.body.text}`)
      await page.getByRole('button', { name: `Content ${viewport.width}` }).click()
      await page.getByRole('button', { name: 'Show content' }).click()
      const frame = page.locator('iframe.html')
      await frame.waitFor()
      expect(await frame.getAttribute('sandbox')).toBe('')
      const srcdoc = (await frame.getAttribute('srcdoc'))!
      expect(srcdoc).toContain(`content="default-src 'none'"`)
      for (const gone of ['<script', 'onerror', 'javascript:', '<style', probe.url]) expect(srcdoc).not.toContain(gone)
      // The frame's document is parsed: a script in it would have run, an image started loading.
      await page.frameLocator('iframe.html').getByText('Hello reader').waitFor()
      expect(probe.hits).toEqual([])
      await screenshot(page, `content-${viewport.width}`, false)

      await page.getByRole('button', { name: 'Text', exact: true }).click()
      expect(await page.getByLabel('The message as text').textContent()).toMatch(/^Hello reader/)
      await page.getByRole('button', { name: 'Source' }).click()
      expect(await page.getByLabel('The raw message').textContent()).toContain(`Subject: Content ${viewport.width}`)
      expect(probe.hits).toEqual([])
      // Reading the hostile HTML (inert, to sanitize it) meets the console's own policy, which
      // blocks its handler and style and says so; nothing else is reported.
      const blocked =
        /^(Executing inline event handler|Applying inline style) violates .* The action has been blocked\.$/
      expect(problems().filter((p) => !blocked.test(p))).toEqual([])
      await context.close()
    })

    it("a message's content: a delivered message's is no longer kept, and the story says so", async () => {
      const delivered = await env.api('POST', '/mail/send', {
        from: 'me@example.org',
        to: 'bob@example.com',
        subject: `Gone ${viewport.width}`,
        body: 'x',
      })
      await env.settled(delivered.body.text)
      const { context, page, problems } = await open(`/console/log?mailid=${delivered.body.text}`)
      await page.getByRole('button', { name: `Gone ${viewport.width}` }).click()
      await page.getByRole('button', { name: 'Show content' }).click()
      await page.locator('.content .notice').filter({ hasText: 'no longer kept' }).waitFor()
      expect(problems()).toEqual([])
      await context.close()
    })

    it('Overview: no cost where the operator set no price', async () => {
      const { context, page, problems } = await open('/console')
      await page.locator('#usage').filter({ hasNotText: '…' }).waitFor()
      expect(await page.locator('.figures > div:not([hidden]) > dt').allTextContents()).toEqual(['Messages'])
      expect(await page.locator('#cost').count()).toBe(0)
      expect(problems()).toEqual([])
      await context.close()
    })
  })
})
