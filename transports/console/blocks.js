import { api } from './api.js'
import { $, ask, fill, guard, h, say } from './dom.js'
import { start } from './shell.js'

/** Delists `address` once the person has confirmed it. */
async function delist(address, role) {
  const what =
    role === 'recipient' ? `Mail to ${address} will be accepted again` : `${address} will be able to send again`
  if (!(await ask(`Delist ${address}? ${what}, until it is blocked again.`, 'Delist'))) return
  await guard(async () => {
    await api('POST', '/mail/blocks/delete', { body: { email: address } })
    say(`${address} was delisted.`)
    await load()
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

async function load() {
  const blocks = await api('GET', '/mail/blocks')
  fill($('#local tbody'), blocks.local, eventRow('recipient'), 'No mail was refused to suppressed recipients.')
  fill($('#mbtrap tbody'), blocks.mbtrap, eventRow('sender'), 'No mail went to spam traps.')
  fill(
    $('#subject tbody'),
    blocks.subject,
    (s) => h('tr', {}, h('td', {}, s.from), h('td', {}, s.subject), h('td', {}, delistButton(s.from, 'sender'))),
    'No sender repeated a spam-like subject.',
  )
}

start(load)
