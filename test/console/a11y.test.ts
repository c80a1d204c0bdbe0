import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PAGES } from '../../transports/console-layout.js'
import { expectAccessible } from './axe.js'
import { type ConsoleEnv, describeChromium, loaded, newPage, signIn, startConsole, VIEWPORTS } from './browser.js'
import { DOMAIN, startDomainDns } from './domains.js'
import { FORGED, receive, receiving } from './inbound.js'

// Every page of the console, filled with data, and its dialogs, checked with axe-core.
describeChromium('console: accessibility (axe-core)', () => {
  let env: ConsoleEnv
  let dns: Awaited<ReturnType<typeof startDomainDns>>
  let txid: string
  beforeAll(async () => {
    dns = await startDomainDns()
    env = await startConsole(['trap@example.net'], {
      env: dns.env,
      setup: async (admin) => {
        await dns.setup(admin)
        // The Inbox page with mail: one message that passed its checks, with HTML, and a forgery.
        await receiving(admin, DOMAIN, 'agent')
        const inbox = `agent@${DOMAIN}`
        await receive(admin, inbox, {
          from: { address: 'alice@remote.example', name: 'Alice' },
          subject: 'Signed',
          text: 'Hello',
          html: '<p>Hello <b>there</b></p>',
          attachments: [{ index: 0, filename: 'a.pdf', contentType: 'application/pdf', size: 5 }],
        })
        await receive(admin, inbox, { from: { address: 'ceo@bank.example', name: '' }, subject: 'Forged' }, FORGED)
      },
    })
    await env.api('POST', '/mail/rules', { type: 'domain', data: 'spam.example' })
    await env.api('POST', '/webhooks', { url: 'https://hooks.example.com/mail', events: ['message.failed'] })
    const sent = await env.api('POST', '/mail/send', {
      from: 'me@example.org',
      to: 'later@example.com',
      subject: 'Waiting',
      body: '<p>Hello <b>there</b></p>',
    })
    txid = sent.body.text
  })
  afterAll(async () => {
    await env?.close()
    dns?.stop()
  })

  describe.each(VIEWPORTS)('at $name', ({ viewport, isMobile }) => {
    let session: Awaited<ReturnType<typeof newPage>>
    let page: Page
    beforeAll(async () => {
      session = await newPage(env, { viewport, isMobile })
      page = session.page
      await page.goto(`${env.base}/console/sign-in`)
      await expectAccessible(page, 'sign-in')
      await signIn(page, env.base, env.apiKey)
    })
    afterAll(async () => {
      expect(session.problems()).toEqual([])
      await session.context.close()
    })

    it.each(Object.entries(PAGES).filter(([name]) => name !== 'sign-in'))('%s', async (name, { path }) => {
      await page.goto(`${env.base}${path}`)
      await loaded(page)
      await expectAccessible(page, name)
    })

    it("a message's story with its content", async () => {
      await page.goto(`${env.base}/console/log?mailid=${txid}`)
      await page.getByRole('button', { name: 'Waiting' }).click()
      await page.getByRole('button', { name: 'Show content' }).click()
      await page.locator('iframe.html').waitFor()
      await expectAccessible(page, 'story with content')
    })

    it('a received message, and a forged one with its warnings', async () => {
      await page.goto(`${env.base}/console/inbox`)
      await page.getByRole('button', { name: 'Signed' }).click()
      await page.locator('#message iframe.html').waitFor()
      await page.locator('#message .conversation').waitFor()
      await expectAccessible(page, 'received message')
      await page.locator('#message').getByRole('button', { name: 'Close the message' }).click()
      await page.getByRole('button', { name: 'Forged' }).click()
      await page.locator('#message .warnings').waitFor()
      await page.locator('#message .conversation').waitFor()
      await expectAccessible(page, 'forged message')
      await page.locator('#message').getByRole('button', { name: 'Close the message' }).click()
    })

    it('a new key shown once, and a confirm dialog', async () => {
      await page.goto(`${env.base}/console/keys`)
      await page.getByRole('button', { name: 'Create key' }).click()
      await page.locator('#new-key code').waitFor()
      await expectAccessible(page, 'a new key shown')
      await page.getByRole('button', { name: 'Revoke key 1' }).click()
      await page.getByRole('dialog').waitFor()
      await expectAccessible(page, 'confirm dialog')
      await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click()
    })

    it("a domain's checked records", async () => {
      await page.goto(`${env.base}/console/domains`)
      await page.getByRole('button', { name: `Check the records of ${DOMAIN}` }).click()
      await page.locator('.check .badge').first().waitFor()
      await expectAccessible(page, 'domain checked')
    })
  })
})
