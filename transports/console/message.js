// A received message in a dialog over the Inbox page: what it is, its authentication verdict in
// words, its content (text, or sanitized HTML in a sandboxed frame, as the log's story shows a
// sent one), its attachments and its conversation. Opening an unread message marks it read.
import { api } from './api.js'
import { contentViews, VIEWS } from './content.js'
import { $, count, fail, h, utc } from './dom.js'
import { LEVELS, sentence, verdict } from './verdict.js'

const dialog = $('#message')
const body = $('#message-body')
let opener = null
/** Told each message marked read, so that the page's lists can follow. */
let onRead = () => {}

$('#message-close').addEventListener('click', () => dialog.close())
// Escape closes it too (the dialog's own cancel); focus goes back to what opened it.
dialog.addEventListener('close', () => opener?.isConnected && opener.focus())

/** Calls `listener(id)` for each message the dialog marks read. */
export const whenRead = (listener) => {
  onRead = listener
}

/** An address as mail shows it: `Name <address>`, or the address alone. */
export const person = (a) => (a ? (a.name ? `${a.name} <${a.address}>` : a.address) : '<>')

/** The badge of a verdict's level. */
export const verdictBadge = (v) => h('span', { class: `badge ${v.level}` }, LEVELS[v.level])

/** Opens received message `id`, focus returning to `from` (else the last opener) when it closes. */
export async function openMessage(id, from) {
  opener = from ?? opener
  $('#message-title').textContent = 'Message'
  body.replaceChildren(h('p', {}, 'Loading…'))
  if (!dialog.open) dialog.showModal()
  try {
    const message = await api('GET', `/inbound/${encodeURIComponent(id)}`)
    const conversation = await api('GET', `/threads/${encodeURIComponent(message.threadId)}`)
    $('#message-title').textContent = message.subject || '(no subject)'
    body.replaceChildren(
      facts(message),
      ...(message.automatic ? [h('p', { class: 'notice' }, `An automatic message (${message.automatic}).`)] : []),
      authentication(message.auth),
      section('content', 'Content', ...contentViews(message, VIEWS.slice(0, 2))),
      ...(message.attachments.length ? [attachments(message.attachments)] : []),
      conversationOf(conversation, message.id),
    )
    // Read once shown; a refusal is said on the page, the message staying in view.
    if (!message.read)
      await api('POST', '/inbound/read', { body: { ids: [message.id] } }).then(
        () => onRead(message.id),
        (err) => fail(err.message),
      )
  } catch (err) {
    body.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message))
  }
}

const section = (id, heading, ...children) =>
  h('section', { class: id, 'aria-labelledby': `${id}-h` }, h('h3', { id: `${id}-h` }, heading), ...children)

function facts(m) {
  const list = (addresses) => addresses.map(person).join(', ')
  const rows = [
    ['From', person(m.from)],
    ['To', list(m.to)],
    ['Cc', list(m.cc)],
    ['Reply-To', list(m.replyTo)],
    ['Inbox', m.inbox],
    ['Date', m.date && `${utc(m.date)} UTC`],
    ['Received', `${utc(m.received)} UTC`],
    ['Envelope sender', m.mailFrom || '<> (a bounce)'],
    ['Message-ID', m.messageId],
    ['Size', `${count(m.size)} bytes`],
  ]
  return h(
    'dl',
    { class: 'facts' },
    rows.filter(([, v]) => v).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))),
  )
}

/** What the verdict's line says when no check passed. */
const NOTHING = { bad: 'It failed the checks below.', warn: 'Nothing proves who sent it.' }

/** The verdict: a badge and one sentence of what passed, then a warning for each check that did not. */
function authentication(auth) {
  const v = verdict(auth)
  const passed = v.parts.filter((p) => p.level === 'ok')
  const sorry = v.parts.filter((p) => p.level !== 'ok')
  return section(
    'authentication',
    'Authentication',
    h('p', { class: 'verdict' }, verdictBadge(v), ' ', passed.length ? `${sentence(passed)}.` : NOTHING[v.level]),
    sorry.length > 0 &&
      h(
        'ul',
        { class: 'warnings' },
        sorry.map((p) => h('li', { class: `notice ${p.level}` }, h('strong', {}, 'Warning: '), p.text)),
      ),
  )
}

const attachments = (list) =>
  section(
    'attachments',
    'Attachments',
    h(
      'ul',
      {},
      list.map((a) =>
        h(
          'li',
          {},
          a.filename ?? '(no name)',
          h('span', { class: 'muted' }, ` ${a.contentType}, ${count(a.size)} bytes`),
        ),
      ),
    ),
  )

/** The thread, oldest first: what was received (each opens here) and what was sent (its story in the log). */
function conversationOf(thread, current) {
  const entry = (e) => {
    if (e.direction === 'sent') {
      const m = e.message
      const story = `/console/log?${new URLSearchParams({ mailid: m.mailid, story: m.mailid })}`
      return h(
        'li',
        { class: 'sent' },
        h('time', { datetime: e.time }, `${utc(e.time)} UTC`),
        ' ',
        h('strong', {}, 'Sent'),
        ` by ${m.from} to ${m.to.join(', ')}: `,
        h('a', { href: story }, m.subject || '(no subject)'),
      )
    }
    const m = e.message
    const here = m.id === current
    const open = h(
      'button',
      // The dialog's own opener stays the one focus returns to.
      { type: 'button', class: 'link', onclick: () => openMessage(m.id) },
      m.subject || '(no subject)',
    )
    return h(
      'li',
      { class: 'received', 'aria-current': here ? 'true' : undefined },
      h('time', { datetime: e.time }, `${utc(e.time)} UTC`),
      ' ',
      h('strong', {}, 'Received'),
      ` from ${person(m.from)}: `,
      here ? [m.subject || '(no subject)', h('span', { class: 'muted' }, ' (this message)')] : open,
    )
  }
  const n = thread.messages.length
  return section(
    'conversation',
    `Conversation (${n} message${n === 1 ? '' : 's'})`,
    h('ol', { class: 'timeline' }, thread.messages.map(entry)),
  )
}
