// Messages held for a person's approval: the list, and with `?id=` (a held message's approvalUrl)
// that one first, with its text. Its HTML is never shown here: the decision is made on what it says.
import { api } from './api.js'
import { $, ask, fill, guard, h, say, utc } from './dom.js'
import { start } from './shell.js'

const focused = new URLSearchParams(location.search).get('id')?.toLowerCase() ?? null

const DONE = {
  approve: 'approved: it is queued for delivery',
  reject: 'rejected: it will never be sent',
}

/** Asks, then approves or rejects held message `m`, and shows the page again. */
async function decide(m, decision) {
  const to = m.to.join(', ')
  const question =
    decision === 'approve'
      ? `Approve the message to ${to}? It is sent at once.`
      : `Reject the message to ${to}? It is never sent, and its content is dropped.`
  if (!(await ask(question, decision === 'approve' ? 'Approve' : 'Reject'))) return
  await guard(async () => {
    await api('POST', `/mail/approvals/${encodeURIComponent(m.id)}/${decision}`)
    await load()
    say(`Message ${m.id} was ${DONE[decision]}.`)
  })
}

const button = (m, decision, label) =>
  h(
    'button',
    {
      type: 'button',
      class: decision === 'approve' ? '' : 'quiet',
      'aria-label': label,
      onclick: () => decide(m, decision),
    },
    decision === 'approve' ? 'Approve' : 'Reject',
  )

const about = (m) => `the message to ${m.to.join(', ')}${m.subject ? ` (${m.subject})` : ''}`

const row = (m) =>
  h(
    'tr',
    {},
    h('td', {}, m.from),
    h('td', {}, m.to.join(', ')),
    h('td', {}, h('a', { href: `/console/approvals?id=${encodeURIComponent(m.id)}` }, m.subject || '(no subject)')),
    h('td', {}, m.reason),
    h('td', { class: 'nowrap' }, utc(m.expiresAt)),
    h(
      'td',
      { class: 'actions' },
      button(m, 'approve', `Approve ${about(m)}`),
      ' ',
      button(m, 'reject', `Reject ${about(m)}`),
    ),
  )

function facts(m) {
  const rows = [
    ['Transaction id', m.id],
    ['From', m.from],
    ['To', m.to.join(', ')],
    ['Subject', m.subject || '(no subject)'],
    ['Why it is held', m.reason],
    ['Held by the policy of', m.holder],
    ['Held (UTC)', utc(m.createdAt)],
    ['Rejected unless decided by (UTC)', utc(m.expiresAt)],
  ]
  return h(
    'dl',
    { class: 'facts' },
    rows.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))),
  )
}

/** The held message's text, as text: a `<pre>` of what it says, never its HTML. */
async function text(m) {
  try {
    const content = await api('GET', `/mail/log/${encodeURIComponent(m.id)}/content`)
    if (content.text === null)
      return h('p', {}, 'This message has no text part: approve it only if you know what it says.')
    return h('pre', { class: 'source', tabindex: 0, 'aria-label': 'The message as text' }, content.text)
  } catch (err) {
    return h('p', { class: 'notice' }, err.message)
  }
}

/**
 * A message not among the waiting ones listed: from its story, either held still (older than the
 * list) or what became of it.
 */
async function fromStory(id) {
  let message
  try {
    message = await api('GET', `/mail/log/${encodeURIComponent(id)}`)
  } catch (err) {
    return { said: err.status === 404 ? `No message ${id} in this account.` : err.message }
  }
  const hold = message.hold
  if (!hold) return { said: `Message ${id} was not held for approval.` }
  if (hold.status !== 'held') {
    const by = hold.decidedBy ? ` by ${hold.decidedBy}` : ''
    return { said: `Message ${id} is no longer waiting: it was ${hold.status} at ${utc(hold.decidedAt)} UTC${by}.` }
  }
  const to = message.recipients.map((r) => r.recipient)
  return {
    held: { ...hold, id: message.id, from: message.from, to, subject: message.subject, createdAt: message.createdAt },
  }
}

async function showFocused(waiting) {
  $('#focus').hidden = false
  const place = $('#held')
  const found = waiting.find((a) => a.id === focused)
  const { held: m, said } = found ? { held: found } : await fromStory(focused)
  if (!m) return place.replaceChildren(h('p', {}, said))
  place.replaceChildren(
    facts(m),
    await text(m),
    h('div', { class: 'actions' }, button(m, 'approve', 'Approve'), ' ', button(m, 'reject', 'Reject')),
  )
}

async function load() {
  // The newest hundred waiting: the list, and the focused one among them.
  const { approvals, total } = await api('GET', '/mail/approvals', { query: { status: 'held', limit: 100 } })
  fill($('#approvals tbody'), approvals, row, 'No message is waiting for approval.')
  if (total > approvals.length) say(`The newest ${approvals.length} of ${total} waiting messages are shown.`)
  if (focused) await showFocused(approvals)
}

start(load)
