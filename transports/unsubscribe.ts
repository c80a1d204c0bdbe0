import type { Context, Hono } from 'hono'
import { html } from 'hono/html'
import { ONE_CLICK, UNSUBSCRIBE_PATH, unsubscribe } from '../relay/unsubscribe.js'
import type { Services } from '../tools/define.js'
import { PAGE_HEADERS, page } from './documents.js'

const INVALID = page(
  'Unsubscribe: mailroom',
  '<main><h1>This unsubscribe link is not valid</h1><p role="alert">It was cut short or changed on the way. Nothing was changed; use the link of the message as it came.</p></main>',
)

/**
 * The page a person sees at the link: the question first, as RFC 8058 §3.2 asks of a GET (mail
 * scanners follow links). No form action: it posts to the page's own address, whatever path a
 * proxy serves it under.
 */
const askPage = (address: string) =>
  page(
    'Unsubscribe: mailroom',
    String(html`<main><h1>Unsubscribe?</h1>
<p>Mail of this kind will no longer be sent to <strong>${address}</strong>.</p>
<form method="post">
<input type="hidden" name="List-Unsubscribe" value="One-Click"><input type="hidden" name="page" value="1">
<p><button type="submit">Unsubscribe</button></p>
</form></main>`),
  )

const donePage = (address: string) =>
  page(
    'Unsubscribed: mailroom',
    String(
      html`<main><h1>Unsubscribed</h1><p role="status"><strong>${address}</strong> will get no more of this mail.</p></main>`,
    ),
  )

/** The fields of a POST's form body (RFC 8058 §3.1: `application/x-www-form-urlencoded` or `multipart/form-data`). */
async function formOf(c: Context): Promise<URLSearchParams> {
  if (/^multipart\/form-data/i.test(c.req.header('content-type') ?? '')) {
    const fields = await c.req.parseBody()
    return new URLSearchParams(Object.entries(fields).filter((e): e is [string, string] => typeof e[1] === 'string'))
  }
  return new URLSearchParams(await c.req.text())
}

/**
 * The unsubscribe links of bulk mail (relay/unsubscribe.ts), which need no key: the token is the
 * proof. GET asks; POST with `List-Unsubscribe=One-Click`, a receiver's one-click request or the
 * page's button, suppresses the recipient. A token mailroom did not make is a 404 that changes nothing.
 */
export function mountUnsubscribe(
  app: Hono,
  { store, clock, logger }: Pick<Services, 'store' | 'clock' | 'logger'>,
): void {
  app.get(`${UNSUBSCRIBE_PATH}/:token`, (c) => {
    const link = store.blocks.openUnsubscribeToken(c.req.param('token'))
    if (!link) return c.html(INVALID, 404, PAGE_HEADERS)
    return c.html(askPage(link.address), 200, PAGE_HEADERS)
  })
  app.post(`${UNSUBSCRIBE_PATH}/:token`, async (c) => {
    const link = store.blocks.openUnsubscribeToken(c.req.param('token'))
    if (!link) return c.html(INVALID, 404, PAGE_HEADERS)
    // A body that is no form (a multipart without its boundary, say) is no request either.
    const form = await formOf(c).catch(() => new URLSearchParams())
    if (form.get('List-Unsubscribe') !== 'One-Click') {
      const body = page(
        'Unsubscribe: mailroom',
        `<main><h1>Not an unsubscribe request</h1><p role="alert">A one-click unsubscribe is a POST whose body is ${ONE_CLICK} (RFC 8058). Nothing was changed.</p></main>`,
      )
      return c.html(body, 400, PAGE_HEADERS)
    }
    const added = await unsubscribe(store.blocks, link, form.get('page') === '1' ? 'page' : 'one-click', clock())
    logger.info({ req: c.get('requestId'), account: link.accountId, txid: link.txid, added }, 'recipient unsubscribed')
    return c.html(donePage(link.address), 200, PAGE_HEADERS)
  })
}
