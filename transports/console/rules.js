import { api } from './api.js'
import { $, ask, fill, guard, h, say, valuesOf } from './dom.js'
import { start } from './shell.js'

// The types in words, as the add form's select names them.
const TYPES = Object.fromEntries([...$('#f-type').options].map((o) => [o.value, o.text]))

async function remove(rule) {
  if (
    !(await ask(
      `Delete rule ${rule.id} (${TYPES[rule.type]} ${rule.data})? Mail it refused is accepted again.`,
      'Delete',
    ))
  )
    return
  await guard(async () => {
    await api('DELETE', `/mail/rules/${encodeURIComponent(rule.id)}`)
    await load()
    say(`Rule ${rule.id} was deleted.`)
  })
}

const row = (r) =>
  h(
    'tr',
    {},
    h('td', {}, r.id),
    h('td', {}, r.user),
    h('td', {}, TYPES[r.type] ?? r.type),
    h('td', {}, r.data),
    h('td', { class: 'nowrap' }, r.created),
    h(
      'td',
      {},
      h(
        'button',
        { type: 'button', class: 'quiet', 'aria-label': `Delete rule ${r.id}`, onclick: () => remove(r) },
        'Delete',
      ),
    ),
  )

async function load() {
  fill($('#rules tbody'), await api('GET', '/mail/rules'), row, 'No rules: nothing is refused by a rule.')
}

start(async () => {
  const form = $('#add-rule')
  const orders = (await api('GET', '/mail')).filter((o) => o.status === 'active')
  for (const o of orders) form.elements.user.append(h('option', { value: o.username }, o.username))
  form.elements.user.closest('.field').hidden = orders.length < 2
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    guard(async () => {
      const { type, data, user } = valuesOf(form)
      const added = await api('POST', '/mail/rules', { body: { type, data, ...(user ? { user } : {}) } })
      form.elements.data.value = ''
      await load()
      say(`Rule ${added.text} was added.`)
    })
  })
  await load()
})
