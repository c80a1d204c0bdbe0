import { api } from './api.js'
import { $, ask, fill, guard, h, reveal, say } from './dom.js'
import { start } from './shell.js'

async function revoke(key) {
  if (!(await ask(`Revoke key ${key.id} (${key.prefix}…)? It is refused from then on.`, 'Revoke'))) return
  await guard(async () => {
    await api('DELETE', `/keys/${key.id}`)
    await load()
    say(`Key ${key.id} was revoked.`)
  })
}

/** A send policy in one line (as `mailroom account key policy` prints it); none: the key sends as it is. */
function policy(p) {
  if (!p) return 'none'
  const parts = [
    p.approval === 'always' ? 'approve every send' : p.approval === 'new-recipients' ? 'approve new recipients' : null,
    p.approveAbove === null ? null : `approve above ${p.approveAbove} recipients`,
    p.maxPerHour === null ? null : `${p.maxPerHour}/hour`,
    p.maxPerDay === null ? null : `${p.maxPerDay}/day`,
    p.allowedRecipients.length ? `only to ${p.allowedRecipients.join(', ')}` : null,
  ].filter(Boolean)
  return parts.join('; ') || 'no limits'
}

const row = (k) =>
  h(
    'tr',
    {},
    h('td', {}, k.id),
    h('td', {}, h('code', {}, `${k.prefix}…`)),
    h('td', {}, k.sandbox ? h('span', { class: 'badge sandbox' }, 'sandbox') : 'real'),
    h('td', {}, policy(k.policy)),
    h('td', { class: 'nowrap' }, k.created),
    h('td', { class: 'nowrap' }, k.revoked ?? '—'),
    h(
      'td',
      {},
      k.revoked === null &&
        h(
          'button',
          { type: 'button', class: 'quiet', 'aria-label': `Revoke key ${k.id}`, onclick: () => revoke(k) },
          'Revoke',
        ),
    ),
  )

async function load() {
  fill($('#keys tbody'), await api('GET', '/keys'), row)
}

start(async () => {
  const form = $('#add-key')
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    guard(async () => {
      const made = await api('POST', '/keys', { body: { sandbox: form.elements.sandbox.checked } })
      form.reset()
      await load()
      reveal(
        $('#new-key'),
        `${made.sandbox ? 'Sandbox key' : 'Key'} ${made.id} was created:`,
        made.key,
        `the new key ${made.id}`,
      )
    })
  })
  await load()
})
