import { api } from './api.js'
import { $, ask, count, fill, guard, h, say, utc, valuesOf } from './dom.js'
import { openMessage, person, verdictBadge, whenRead } from './message.js'
import { start } from './shell.js'
import { verdict } from './verdict.js'

/** Received messages per page. */
const PAGE = 25
const filters = $('#inbound-filters')
let skip = 0

async function remove(inbox) {
  const held = inbox.messages ? ` Its ${count(inbox.messages)} messages are deleted with it.` : ''
  const question = `Delete inbox ${inbox.address}?${held} The address refuses mail from then on.`
  if (!(await ask(question, 'Delete'))) return
  await guard(async () => {
    await api('DELETE', `/inboxes/${inbox.id}`)
    // Said once the lists show it: a reader (or a test) told so finds the row gone.
    await Promise.all([inboxes(), messages()])
    say(`Inbox ${inbox.address} was deleted.`)
  })
}

const inboxRow = (i) =>
  h(
    'tr',
    {},
    h('td', {}, i.address),
    h('td', {}, count(i.messages)),
    h('td', {}, count(i.unread)),
    h('td', { class: 'nowrap' }, `${count(i.storedBytes)} bytes`),
    h('td', { class: 'nowrap' }, utc(i.created)),
    h(
      'td',
      {},
      h(
        'button',
        { type: 'button', class: 'quiet', 'aria-label': `Delete inbox ${i.address}`, onclick: () => remove(i) },
        'Delete',
      ),
    ),
  )

/** The inboxes' table, and the filter's choice of them (keeping the one chosen while it exists). */
async function inboxes() {
  const list = await api('GET', '/inboxes')
  fill($('#inboxes tbody'), list, inboxRow, 'No inboxes yet: add one at a receiving domain.')
  const select = filters.elements.inbox
  const chosen = select.value
  select.replaceChildren(
    h('option', { value: '' }, 'All inboxes'),
    ...list.map((i) => h('option', { value: i.address }, i.address)),
  )
  select.value = list.some((i) => i.address === chosen) ? chosen : ''
}

/** A message's state: unread, automatic, and its authentication. */
function state(m) {
  const auth = h('span', { class: 'auth' }, m.auth && verdictBadge(verdict(m.auth)))
  return [
    !m.read && [h('span', { class: 'badge unread' }, 'Unread'), ' '],
    m.automatic && [h('span', { class: 'badge automatic', title: m.automatic }, 'Automatic'), ' '],
    auth,
  ]
}

function row(m) {
  const subject = m.subject || '(no subject)'
  const open = h('button', { type: 'button', class: 'link', 'aria-haspopup': 'dialog' }, subject)
  open.addEventListener('click', (event) => (event.stopPropagation(), openMessage(m.id, open)))
  return h(
    'tr',
    { class: m.read ? 'clickable' : 'clickable unread', 'data-id': m.id, onclick: () => openMessage(m.id, open) },
    h('td', { class: 'nowrap' }, utc(m.received)),
    h('td', {}, person(m.from)),
    h('td', {}, m.inbox),
    h('td', {}, open),
    h('td', {}, state(m)),
  )
}

async function messages() {
  const { inbox, unread } = valuesOf(filters)
  const page = await api('GET', '/inbound', {
    query: { inbox, unread: unread ? 'true' : undefined, skip, limit: PAGE },
  })
  fill($('#inbound tbody'), page.messages, row, unread ? 'No unread messages.' : 'No messages received yet.')
  $('#inbound-range').textContent = page.messages.length
    ? `${count(skip + 1)}–${count(skip + page.messages.length)} of ${count(page.total)}`
    : `0 of ${count(page.total)}`
  $('#inbound-newer').disabled = skip === 0
  $('#inbound-older').disabled = skip + page.messages.length >= page.total
}

// A message opened is read: its row says so at once, the inboxes' counts follow.
whenRead((id) => {
  const tr = $(`#inbound tr[data-id="${CSS.escape(id)}"]`)
  tr?.classList.remove('unread')
  tr?.querySelector('.badge.unread')?.remove()
  guard(inboxes)
})

start(async () => {
  const form = $('#add-inbox')
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    guard(async () => {
      const added = await api('POST', '/inboxes', { body: { address: valuesOf(form).address } })
      form.elements.address.value = ''
      await inboxes()
      say(`Inbox ${added.address} was added.`)
    })
  })
  filters.addEventListener('submit', (event) => {
    event.preventDefault()
    skip = 0
    guard(messages)
  })
  $('#inbound-newer').addEventListener('click', () => ((skip = Math.max(0, skip - PAGE)), guard(messages)))
  $('#inbound-older').addEventListener('click', () => ((skip += PAGE), guard(messages)))
  await inboxes()
  await messages()
})
