import { api } from './api.js'
import { $, ask, count, fill, guard, h, say, utc } from './dom.js'
import { start } from './shell.js'

/** Suppressed recipients per page. */
const PAGE = 50
let skip = 0

/** Delists `address` once the person has confirmed it. */
async function delist(address, role) {
  const what =
    role === 'recipient' ? `Mail to ${address} will be accepted again` : `${address} will be able to send again`
  if (!(await ask(`Delist ${address}? ${what}, until it is blocked again.`, 'Delist'))) return
  await guard(async () => {
    await api('POST', '/mail/blocks/delete', { body: { email: address } })
    await load()
    say(`${address} was delisted.`)
  })
}

const delistButton = (address, role) =>
  h(
    'button',
    { type: 'button', class: 'quiet', 'aria-label': `Delist ${address}`, onclick: () => delist(address, role) },
    'Delist',
  )

// A local event is mail refused to a suppressed recipient: delisting the recipient lifts it. A trap
// event blocked its sender.
const eventRow = (role) => (e) => {
  const address = role === 'recipient' ? e.to : e.from
  return h(
    'tr',
    {},
    h('td', { class: 'nowrap' }, e.date),
    h('td', {}, e.from),
    h('td', {}, e.to),
    h('td', {}, e.subject || '—'),
    h('td', {}, delistButton(address, role)),
  )
}

/** The message whose bounce suppressed a recipient: its story, over the log. None when the operator did it. */
const cause = (mailid) =>
  mailid ? h('a', { href: `/console/log?${new URLSearchParams({ mailid, story: mailid })}` }, mailid) : '—'

const suppressionRow = (s) =>
  h(
    'tr',
    {},
    h('td', {}, s.address),
    h('td', { class: 'nowrap' }, utc(s.since)),
    h('td', {}, s.reason),
    h('td', {}, cause(s.mailid)),
    h('td', {}, delistButton(s.address, 'recipient')),
  )

async function suppressions() {
  const page = await api('GET', '/mail/suppressions', { query: { skip, limit: PAGE } })
  // Delisting the last one of the last page: show the page before.
  if (page.suppressions.length === 0 && skip > 0) {
    skip = Math.max(0, skip - PAGE)
    return suppressions()
  }
  fill($('#suppressions tbody'), page.suppressions, suppressionRow, 'No recipient is suppressed.')
  $('#suppressions-range').textContent =
    `${count(skip + 1)}–${count(skip + page.suppressions.length)} of ${count(page.total)}`
  $('#suppressions-newer').disabled = skip === 0
  $('#suppressions-older').disabled = skip + page.suppressions.length >= page.total
  $('#suppressions-pager').hidden = page.total <= PAGE
}

async function load() {
  const [blocks] = await Promise.all([api('GET', '/mail/blocks'), suppressions()])
  fill($('#local tbody'), blocks.local, eventRow('recipient'), 'No mail was refused to suppressed recipients.')
  fill($('#mbtrap tbody'), blocks.mbtrap, eventRow('sender'), 'No mail went to spam traps.')
  fill(
    $('#subject tbody'),
    blocks.subject,
    (s) => h('tr', {}, h('td', {}, s.from), h('td', {}, s.subject), h('td', {}, delistButton(s.from, 'sender'))),
    'No sender repeated a spam-like subject.',
  )
}

start(async () => {
  $('#suppressions-newer').addEventListener('click', () => ((skip = Math.max(0, skip - PAGE)), guard(suppressions)))
  $('#suppressions-older').addEventListener('click', () => ((skip += PAGE), guard(suppressions)))
  await load()
})
