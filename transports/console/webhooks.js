import { api } from './api.js'
import { $, ask, fill, guard, h, reveal, say, valuesOf } from './dom.js'
import { start } from './shell.js'

async function remove(hook) {
  if (!(await ask(`Delete webhook ${hook.id} (${hook.url})? It gets no more events.`, 'Delete'))) return
  await guard(async () => {
    await api('DELETE', `/webhooks/${hook.id}`)
    await load()
    say(`Webhook ${hook.id} was deleted.`)
  })
}

const row = (w) =>
  h(
    'tr',
    {},
    h('td', {}, w.id),
    h('td', {}, w.url, w.description && h('div', { class: 'muted' }, w.description)),
    h('td', {}, w.events.join(', ')),
    h('td', {}, h('span', { class: `badge ${w.status}` }, w.status)),
    h('td', {}, w.lastError ?? '—'),
    h(
      'td',
      {},
      h(
        'button',
        { type: 'button', class: 'quiet', 'aria-label': `Delete webhook ${w.id}`, onclick: () => remove(w) },
        'Delete',
      ),
    ),
  )

async function load() {
  fill($('#webhooks tbody'), await api('GET', '/webhooks'), row, 'No webhooks: no events are posted.')
}

start(async () => {
  const form = $('#add-webhook')
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    guard(async () => {
      const { url, description } = valuesOf(form)
      const events = [...form.elements.events].filter((box) => box.checked).map((box) => box.value)
      const added = await api('POST', '/webhooks', {
        body: { url, events, ...(description ? { description } : {}) },
      })
      form.elements.url.value = ''
      form.elements.description.value = ''
      await load()
      reveal(
        $('#webhook-secret'),
        `Webhook ${added.id} was added. Its signing secret is`,
        added.secret,
        `the signing secret of webhook ${added.id}`,
      )
    })
  })
  await load()
})
