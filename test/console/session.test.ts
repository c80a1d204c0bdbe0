import { afterAll, beforeAll, expect, it } from 'vitest'
import { PAGES } from '../../transports/console-layout.js'
import {
  type ConsoleEnv,
  describeChromium,
  loaded,
  newPage,
  screenshot,
  signIn,
  startConsole,
  TOUR_MS,
} from './browser.js'

// Signing in and out of the console in Chromium, what it keeps where, and whose data it shows.
describeChromium('console: signing in, the key, and accounts', () => {
  let env: ConsoleEnv
  beforeAll(async () => {
    env = await startConsole()
  })
  afterAll(() => env?.close())

  it('signs in with a key kept in sessionStorage and sent as X-API-KEY, never a cookie; signing out forgets it', async () => {
    const { context, page, problems } = await newPage(env)
    const sent: { url: string; key?: string; cookie?: string }[] = []
    page.on('request', (r) => {
      const url = new URL(r.url())
      if (url.pathname.startsWith('/mail'))
        sent.push({ url: r.url(), key: r.headers()['x-api-key'], cookie: r.headers().cookie })
    })
    // A page of the console without a key leads to the sign-in page, which says why.
    await page.goto(`${env.base}/console/rules`)
    await page.waitForURL(`${env.base}/console/sign-in`)
    expect(await page.locator('#status').textContent()).toBe('Sign in to use the console.')
    // Enter submits; once signed in, the page that was asked for.
    await signIn(page, env.base, env.apiKey, '/console/rules')
    await page.locator('#rules tbody td').first().waitFor()
    expect(await page.evaluate(() => sessionStorage.getItem('mailroom.key'))).toBe(env.apiKey)
    expect(await page.evaluate(() => localStorage.length)).toBe(0)
    expect(await context.cookies()).toEqual([])
    expect(sent.length).toBeGreaterThan(1)
    for (const r of sent) {
      expect(r.key).toBe(env.apiKey)
      expect(r.cookie).toBeUndefined()
      expect(r.url).not.toContain(env.apiKey)
    }
    await screenshot(page, 'signed-in')

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(`${env.base}/console/sign-in`)
    expect(await page.locator('#status').textContent()).toMatch(/^You signed out/)
    expect(await page.evaluate(() => sessionStorage.getItem('mailroom.key'))).toBeNull()
    await page.goto(`${env.base}/console/log`)
    await page.waitForURL(`${env.base}/console/sign-in`)
    expect(problems()).toEqual([])
    await context.close()
  })

  it('a wrong key shows an error, not an empty page, and is not kept; a key refused later sends back to sign in', async () => {
    const { context, page, problems } = await newPage(env)
    await page.goto(`${env.base}/console/sign-in`)
    await page.getByLabel('API key').fill('mr_not-a-key')
    await page.getByRole('button', { name: 'Sign in' }).click()
    const alert = page.getByRole('alert')
    await alert.filter({ hasText: 'refused' }).waitFor()
    expect(await alert.textContent()).toBe('That API key was refused: check it and try again.')
    expect(page.url()).toBe(`${env.base}/console/sign-in`)
    expect(await page.evaluate(() => sessionStorage.getItem('mailroom.key'))).toBeNull()
    await screenshot(page, 'wrong-key')

    // A key that stops working (revoked) mid-session: back to sign in, saying so.
    await page.evaluate(() => sessionStorage.setItem('mailroom.key', 'mr_revoked'))
    await page.goto(`${env.base}/console/blocks`)
    await page.waitForURL(`${env.base}/console/sign-in`)
    await alert.filter({ hasText: 'refused' }).waitFor()
    expect(await alert.textContent()).toMatch(/^The API key was refused/)
    expect(await page.evaluate(() => sessionStorage.getItem('mailroom.key'))).toBeNull()
    expect(problems()).toEqual([])
    await context.close()
  })

  it(
    'shows nothing of another account: each key sees its own log, rules, blocks and orders',
    async () => {
      const mine = await env.api('POST', '/mail/send', {
        from: 'me@example.org',
        to: 'mine@example.com',
        subject: 'mine only',
        body: 'x',
      })
      const theirs = await env.api(
        'POST',
        '/mail/send',
        { from: 'them@example.net', to: 'theirs@example.com', subject: 'theirs only', body: 'x' },
        env.other.apiKey,
      )
      expect([mine.status, theirs.status]).toEqual([200, 200])
      await env.api('POST', '/mail/rules', { type: 'domain', data: 'mine.example' })
      await env.api('POST', '/mail/rules', { type: 'domain', data: 'theirs.example' }, env.other.apiKey)

      for (const [key, own, foreign] of [
        [
          env.apiKey,
          ['mine only', 'mine.example', 'mb1'],
          ['theirs only', 'theirs.example', env.other.username, 'them@example.net'],
        ],
        [
          env.other.apiKey,
          ['theirs only', 'theirs.example', env.other.username],
          ['mine only', 'mine.example', 'mb1', 'me@example.org'],
        ],
      ] as const) {
        const { context, page, problems } = await newPage(env)
        await page.goto(`${env.base}/console/sign-in`)
        await signIn(page, env.base, key)
        let seen = ''
        for (const [name, { path }] of Object.entries(PAGES)) {
          if (name === 'sign-in') continue
          await page.goto(`${env.base}${path}`)
          await loaded(page)
          seen += await page.locator('main').textContent()
        }
        for (const text of own) expect(seen).toContain(text)
        for (const text of foreign) expect(seen).not.toContain(text)
        // Not even when asked for by its transaction id.
        const foreignTxid = key === env.apiKey ? theirs.body.text : mine.body.text
        await page.goto(`${env.base}/console/log?mailid=${foreignTxid}`)
        await page.locator('#log tbody').filter({ hasText: 'No messages match.' }).waitFor()
        await screenshot(page, `own-data-${key === env.apiKey ? 'first' : 'other'}`)
        expect(problems()).toEqual([])
        await context.close()
      }
    },
    2 * TOUR_MS,
  )

  it(
    'is readable and usable at a phone width of 375 px',
    async () => {
      const sent = await env.api('POST', '/mail/send', {
        from: 'someone.with.a.long.name@example.org',
        to: 'a.recipient.with.a.long.address@subdomain.example.com',
        subject: 'A subject long enough to wrap on a phone, as real subjects often are',
        body: 'x',
      })
      await env.settled(sent.body.text)
      const { context, page, problems } = await newPage(env, { viewport: { width: 375, height: 740 }, isMobile: true })
      await page.goto(`${env.base}/console/sign-in`)
      await signIn(page, env.base, env.apiKey)
      for (const { path } of Object.values(PAGES).filter((p) => p.path !== '/console/sign-in')) {
        await page.goto(`${env.base}${path}`)
        await loaded(page)
        // Nothing wider than the screen: wide tables scroll inside their own box.
        expect(await page.evaluate(() => document.documentElement.scrollWidth), path).toBeLessThanOrEqual(375)
        expect(await page.getByRole('navigation', { name: 'Console' }).isVisible()).toBe(true)
      }
      await page.goto(`${env.base}/console/log`)
      await page
        .getByRole('button', { name: /^A subject long enough/ })
        .first()
        .click()
      await page.getByRole('dialog').getByText('delivered', { exact: true }).first().waitFor()
      await screenshot(page, 'phone-story', false)
      await page.keyboard.press('Escape')
      await screenshot(page, 'phone-log')
      expect(problems()).toEqual([])
      await context.close()
    },
    TOUR_MS,
  )

  it(
    'loads every page in under 200 KB on the wire',
    async () => {
      const { context, page } = await newPage(env)
      let bytes = 0
      const counted: Promise<void>[] = []
      page.on('requestfinished', (r) => {
        counted.push(r.sizes().then((s) => void (bytes += s.responseBodySize + s.responseHeadersSize)))
      })
      await page.goto(`${env.base}/console/sign-in`)
      await signIn(page, env.base, env.apiKey)
      for (const { path } of Object.values(PAGES)) {
        await page.goto(`${env.base}${path}`)
        await loaded(page)
      }
      await Promise.all(counted)
      console.info(`console: every page, its assets and its API calls: ${bytes} bytes on the wire`)
      expect(bytes).toBeLessThan(200 * 1024)
      await screenshot(page, 'last-page-of-the-tour')
      await context.close()
    },
    TOUR_MS,
  )
})
