// A message's content in its story: text, HTML (sanitized, in a sandboxed frame) and raw source,
// fetched when asked for (getMessageContent), while the message's body is still kept.
import { api } from './api.js'
import { h } from './dom.js'
import { safeDocument } from './sanitize.js'

const VIEWS = [
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

/** The Content section of the story of transaction `id`. */
export function contentSection(id) {
  const panel = h('div', { class: 'content-view' })
  const buttons = h('div', { class: 'actions', role: 'group', 'aria-label': 'Show the content as' })
  let content = null
  const show = (kind) => {
    for (const b of buttons.children) b.setAttribute('aria-pressed', String(b.value === kind))
    panel.replaceChildren(view(kind, content))
  }
  async function load() {
    panel.replaceChildren(h('p', {}, 'Loading…'))
    try {
      content = await api('GET', `/mail/log/${encodeURIComponent(id)}/content`)
    } catch (err) {
      buttons.replaceChildren()
      panel.replaceChildren(h('p', { class: 'notice' }, err.message))
      return
    }
    buttons.replaceChildren(
      ...VIEWS.map(([kind, label]) =>
        h('button', { type: 'button', class: 'quiet', value: kind, onclick: () => show(kind) }, label),
      ),
    )
    show(content.html !== null ? 'html' : 'text')
  }
  buttons.append(h('button', { type: 'button', class: 'quiet', onclick: load }, 'Show content'))
  return h(
    'section',
    { class: 'content', 'aria-labelledby': 'content-h' },
    h('h3', { id: 'content-h' }, 'Content'),
    buttons,
    panel,
  )
}
