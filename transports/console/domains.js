import { api } from './api.js'
import { $, guard, h, say } from './dom.js'
import { start } from './shell.js'

const STATE = { ok: 'Published', differs: 'Differs', missing: 'Missing' }

/** A record to publish, with a Copy button for its value and, once checked, what DNS says. */
function record(r, i, domain) {
  const id = `record-${domain}-${i}`
  return h(
    'li',
    { class: 'record' },
    h('div', {}, h('strong', {}, r.type), ' ', h('code', { class: 'name' }, r.name)),
    h(
      'div',
      {},
      h('code', { id }, r.value),
      ' ',
      h(
        'button',
        { type: 'button', class: 'quiet', 'data-copy': id, 'aria-label': `Copy the value of ${r.name}` },
        'Copy',
      ),
    ),
    h('div', { class: 'check', 'data-name': r.name }),
  )
}

function card(d) {
  const list = h(
    'ol',
    { class: 'records-list' },
    d.records.map((r, i) => record(r, i, d.domain)),
  )
  const check = () =>
    guard(async () => {
      const checked = await api('GET', `/domains/${encodeURIComponent(d.domain)}/check`)
      checked.records.forEach((r, i) => {
        const state = r.matches ? 'ok' : r.published ? 'differs' : 'missing'
        list.children[i]
          .querySelector('.check')
          .replaceChildren(
            h('span', { class: `badge ${state}` }, STATE[state]),
            ...(state === 'differs' ? [` found: ${r.found.join(' | ')}`] : []),
          )
      })
      say(
        checked.ok ? `Every record of ${d.domain} is published.` : `Some records of ${d.domain} are not published yet.`,
      )
    })
  return h(
    'li',
    { class: 'card' },
    h('h2', {}, d.domain),
    h(
      'p',
      {},
      'Keys: ',
      d.keys.map((k, i) => [i ? ', ' : '', `${k.selector} (${k.algorithm}${k.signing ? ', signing' : ''})`]),
    ),
    h('h3', {}, 'Records to publish'),
    list,
    h('button', { type: 'button', onclick: check, 'aria-label': `Check the records of ${d.domain}` }, 'Check'),
  )
}

start(async () => {
  const domains = await api('GET', '/domains')
  $('#domains').replaceChildren(
    ...(domains.length ? domains.map(card) : [h('li', {}, 'This account has no sending domains.')]),
  )
})
