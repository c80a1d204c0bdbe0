// A message's story in a dialog over the log: what it is, and per recipient every attempt.
import { api } from './api.js'
import { contentSection } from './content.js'
import { $, count, h, sandboxBadge, utc } from './dom.js'

const dialog = $('#story')
const body = $('#story-body')
let opener = null

$('#story-close').addEventListener('click', () => dialog.close())
// Escape closes it too (the dialog's own cancel); focus goes back to the row that opened it.
dialog.addEventListener('close', () => opener?.focus())

/** Opens the story of transaction `id`, focus returning to `from` when it closes. */
export async function openStory(id, from) {
  opener = from
  $('#story-title').textContent = 'Message'
  body.replaceChildren(h('p', {}, 'Loading…'))
  if (!dialog.open) dialog.showModal()
  try {
    const message = await api('GET', `/mail/log/${encodeURIComponent(id)}`)
    $('#story-title').textContent = message.subject || '(no subject)'
    const sandbox = h(
      'p',
      { class: 'notice' },
      sandboxBadge(),
      ' Sandbox mail: it went through every check and is recorded, but it was never sent.',
    )
    const held = h(
      'p',
      { class: 'notice' },
      `Held for approval (${message.hold?.reason}): `,
      h('a', { href: `/console/approvals?id=${encodeURIComponent(message.id)}` }, 'approve or reject it'),
      '.',
    )
    body.replaceChildren(
      ...(message.sandbox ? [sandbox] : []),
      ...(message.hold?.status === 'held' ? [held] : []),
      facts(message),
      ...message.recipients.map(recipient),
      contentSection(message.id),
    )
  } catch (err) {
    body.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message))
  }
}

function facts(m) {
  const rows = [
    ['Transaction id', m.id],
    ['Envelope sender', m.from],
    ['From', m.headerFrom],
    ['Reply-To', m.replyTo],
    ['Message-ID', m.messageId],
    ['Accepted (UTC)', utc(m.createdAt)],
    ['Size', m.size === null || m.size === undefined ? null : `${count(m.size)} bytes`],
    ['Submitted', [m.interface, m.transtype, m.origin].filter(Boolean).join(', ')],
    ['Order', m.user],
  ]
  return h(
    'dl',
    { class: 'facts' },
    rows.filter(([, v]) => v).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))),
  )
}

const STATUS = {
  queued: 'Queued',
  deferred: 'Deferred',
  delivered: 'Delivered',
  failed: 'Failed',
  held: 'Held for approval',
  rejected: 'Rejected',
}

function recipient(r) {
  return h(
    'section',
    { class: 'recipient' },
    h('h3', {}, r.recipient, ' ', h('span', { class: `badge ${r.status}` }, STATUS[r.status] ?? r.status)),
    h(
      'p',
      {},
      `${r.attempts} attempt${r.attempts === 1 ? '' : 's'}`,
      r.nextAttemptAt && `; next attempt ${utc(r.nextAttemptAt)} UTC`,
    ),
    r.suppressed &&
      h(
        'p',
        { class: 'notice' },
        'Suppressed: this address is on the local block list, so later mail to it is refused until it is delisted on the ',
        h('a', { href: '/console/blocks' }, 'Blocks'),
        ' page.',
      ),
    h('ol', { class: 'timeline' }, r.timeline.map(step)),
  )
}

/** The destination's reply: its text, which most often begins with its code already. */
const reply = ({ code, response }) =>
  code !== null && !response?.startsWith(String(code)) ? `${code} ${response ?? ''}`.trim() : (response ?? '')

/** What the MX certificate proved for its name, beside "TLS". */
const certificate = { true: ', valid certificate', false: ', certificate not valid for the name' }

function step(e) {
  const where = [
    e.mxHostname,
    e.mxAddress && `[${e.mxAddress}]`,
    e.tls === true ? `TLS${certificate[String(e.certValid)] ?? ''}` : e.tls === false ? 'no TLS' : null,
    e.tlsPolicy === 'testing' || e.tlsPolicy === 'enforce' ? `(MTA-STS ${e.tlsPolicy})` : null,
  ]
  return h(
    'li',
    { class: e.event },
    h('time', { datetime: e.time }, utc(e.time)),
    ' ',
    h('strong', {}, e.event),
    where.some(Boolean) && ` via ${where.filter(Boolean).join(' ')}`,
    (e.code !== null || e.response) && h('code', { class: 'reply' }, reply(e)),
    e.nextAttemptAt && h('span', { class: 'next' }, `next attempt ${utc(e.nextAttemptAt)} UTC`),
  )
}
