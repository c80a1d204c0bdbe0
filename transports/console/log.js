import { api } from './api.js'
import { $, count, fill, guard, h, sandboxBadge, valuesOf } from './dom.js'
import { start } from './shell.js'
import { openStory } from './story.js'

const form = $('#filters')
const rows = $('#log tbody')
let skip = 0
let shown = { total: 0, count: 0, limit: 50 }

/** A row's state in words: the log says delivered or not, and the destination's last reply code. */
function status(e) {
  if (e.delivered === 1) return ['delivered', 'Delivered']
  if (e.code >= 500) return ['failed', `Failed ${e.code}`]
  if (e.code >= 400) return ['deferred', `Deferred ${e.code}`]
  return ['queued', 'Queued']
}

function row(e) {
  const [cls, text] = status(e)
  const open = h('button', { type: 'button', class: 'link', 'aria-haspopup': 'dialog' }, e.subject || '(no subject)')
  open.addEventListener('click', (event) => (event.stopPropagation(), openStory(e.id, open)))
  return h(
    'tr',
    { class: 'clickable', onclick: () => openStory(e.id, open) },
    h('td', { class: 'nowrap' }, e.created),
    // The null sender of bounce reports, as SMTP writes it.
    h('td', {}, e.from || '<>'),
    h('td', {}, e.to),
    h('td', {}, open),
    h(
      'td',
      {},
      h('span', { class: `badge ${cls}`, title: e.response ?? undefined }, text),
      e.sandbox && [' ', sandboxBadge()],
    ),
  )
}

async function load() {
  const filters = valuesOf(form)
  const query = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== ''))
  // The filters (never the key) go in the address, so that a search can be bookmarked.
  const search = new URLSearchParams(query).toString()
  history.replaceState(null, '', search ? `?${search}` : location.pathname)
  const log = await api('GET', '/mail/log', { query: { ...query, skip } })
  shown = { total: log.total, count: log.emails.length, limit: log.limit }
  fill(rows, log.emails, row, 'No messages match.')
  $('#range').textContent = log.emails.length
    ? `${count(skip + 1)}–${count(skip + log.emails.length)} of ${count(log.total)}`
    : `0 of ${count(log.total)}`
  $('#newer').disabled = skip === 0
  $('#older').disabled = skip + log.emails.length >= log.total
}

async function orders() {
  const list = await api('GET', '/mail')
  const select = form.elements.id
  for (const o of list)
    select.append(h('option', { value: o.id }, `${o.username}${o.comment ? ` (${o.comment})` : ''}`))
  select.value = new URLSearchParams(location.search).get('id') ?? ''
  // One order: nothing to choose.
  select.closest('.field').hidden = list.length < 2
}

start(async () => {
  for (const [name, value] of new URLSearchParams(location.search)) {
    if (form.elements[name] && name !== 'id') form.elements[name].value = value
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    skip = 0
    guard(load)
  })
  form.addEventListener('reset', () => setTimeout(() => ((skip = 0), guard(load))))
  $('#refresh').addEventListener('click', () => guard(load))
  $('#newer').addEventListener('click', () => ((skip = Math.max(0, skip - shown.limit)), guard(load)))
  $('#older').addEventListener('click', () => ((skip += shown.limit), guard(load)))
  // A link to one message's story (the Blocks page's, for the bounce that suppressed a recipient);
  // read before the first search puts only the filters in the address.
  const story = new URLSearchParams(location.search).get('story')
  await orders()
  await load()
  if (story) await openStory(story, $('#log tbody button'))
})
