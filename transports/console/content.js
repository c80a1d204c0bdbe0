// A message's content in its story: text, HTML (sanitized, in a sandboxed frame) and raw source,
// fetched when asked for (getMessageContent), while the message's body is still kept.
import { api } from './api.js'
import { h } from './dom.js'
import { safeDocument } from './sanitize.js'

export const VIEWS = [
  ['text', 'Text'],
  ['html', 'HTML'],
  ['raw', 'Source'],
]

function view(kind, content) {
  if (kind === 'html') {
    if (content.html === null) return h('p', {}, 'This message has no HTML part.')
    // No allow-scripts, no allow-same-origin: nothing in the frame runs, nor reaches this page.
    return h('iframe', { class: 'html', sandbox: '', title: 'The message as HTML', srcdoc: safeDocument(content.html) })
  }
  const text = kind === 'text' ? content.text : content.raw
  if (text === null) return h('p', {}, 'This message has no text part.')
  return h(
    'pre',
    { class: 'source', tabindex: 0, 'aria-label': kind === 'text' ? 'The message as text' : 'The raw message' },
    text,
  )
}

/**
 * The buttons that switch between views of a message's content ({text, html, raw}), `kinds` of
 * VIEWS, and the panel showing the chosen one: the HTML first where there is some.
 */
export function contentViews(content, kinds = VIEWS) {
  const panel = h('div', { class: 'content-view' })
  const buttons = h('div', { class: 'actions', role: 'group', 'aria-label': 'Show the content as' })
  const show = (kind) => {
    for (const b of buttons.children) b.setAttribute('aria-pressed', String(b.value === kind))
    panel.replaceChildren(view(kind, content))
  }
  buttons.replaceChildren(
    ...kinds.map(([kind, label]) =>
      h('button', { type: 'button', class: 'quiet', value: kind, onclick: () => show(kind) }, label),
    ),
  )
  show(content.html !== null ? 'html' : 'text')
  return [buttons, panel]
}

/** The Content section of the story of transaction `id`. */
export function contentSection(id) {
  const place = h('div', {}, h('button', { type: 'button', class: 'quiet', onclick: load }, 'Show content'))
  async function load() {
    place.replaceChildren(h('p', {}, 'Loading…'))
    try {
      place.replaceChildren(...contentViews(await api('GET', `/mail/log/${encodeURIComponent(id)}/content`)))
    } catch (err) {
      place.replaceChildren(h('p', { class: 'notice' }, err.message))
    }
  }
  return h(
    'section',
    { class: 'content', 'aria-labelledby': 'content-h' },
    h('h3', { id: 'content-h' }, 'Content'),
    place,
  )
}
