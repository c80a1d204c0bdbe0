// Building the page from API data. Everything the API says is inserted as text (text nodes,
// attributes), never parsed as HTML: a subject like `<img src=x onerror=…>` shows as written.

export const $ = (selector, root = document) => root.querySelector(selector)

/** An element with attributes (`on…` ones are listeners) and children; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el =
    tag === 'svg' || tag === 'rect' || tag === 'g' || tag === 'title' || tag === 'line' || tag === 'text'
      ? document.createElementNS('http://www.w3.org/2000/svg', tag)
      : document.createElement(tag)
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value)
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  el.append(...children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false))
  return el
}

/** Shows an error in the page's alert area (read out by screen readers). */
export function fail(message) {
  $('#status').textContent = ''
  $('#alert').textContent = message
}

/** Shows a status line (read out politely), clearing any error. */
export function say(message) {
  $('#alert').textContent = ''
  $('#status').textContent = message
}

/** Runs an action, showing its error, if any, in the alert area. */
export async function guard(action) {
  try {
    $('#alert').textContent = ''
    $('#status').textContent = ''
    await action()
  } catch (err) {
    fail(err.message)
  }
}

/** A form's fields as an object of trimmed strings. */
export function valuesOf(form) {
  return Object.fromEntries([...new FormData(form)].map(([k, v]) => [k, String(v).trim()]))
}

/** Asks before a destructive action, in the page's confirm dialog; resolves true when confirmed. */
export function ask(question, action) {
  const dialog = $('#confirm')
  $('#confirm-text').textContent = question
  $('#confirm-ok').textContent = action
  dialog.returnValue = ''
  dialog.showModal()
  $('#confirm-ok').focus()
  return new Promise((resolve) =>
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true }),
  )
}

/**
 * Rows of a table body, or one row saying it is empty. Each cell is labelled with its column's
 * name, which a phone-wide screen shows beside it (console.css: tables become cards).
 */
export function fill(tbody, items, row, empty = 'Nothing here.') {
  // An action column's name is for screen readers only: its buttons say what they do.
  const names = [...tbody.closest('table').querySelectorAll('thead th')].map((th) =>
    th.querySelector('.sr-only') ? '' : th.textContent,
  )
  const rows = items.length ? items.map(row) : [h('tr', {}, h('td', { colspan: names.length, class: 'empty' }, empty))]
  for (const tr of rows) {
    for (const [i, td] of [...tr.cells].entries()) if (names[i] && td.colSpan === 1) td.dataset.label = names[i]
  }
  tbody.replaceChildren(...rows)
}

/** An ISO 8601 time as `YYYY-MM-DD HH:MM:SS` (UTC). */
export const utc = (iso) => (iso ? new Date(iso).toISOString().slice(0, 19).replace('T', ' ') : '')

export const count = (n) => new Intl.NumberFormat('en').format(n)

/** What marks sandbox mail wherever a message is shown: it went through everything but was never sent. */
export const sandboxBadge = () =>
  h('span', { class: 'badge sandbox', title: 'Sandbox mail: recorded, never sent' }, 'sandbox')

/**
 * Shows a secret the API returns only once (a new key, password or signing secret) in `place`,
 * with a Copy button (shell.js) and a word that it is not shown again.
 */
export function reveal(place, label, value, what) {
  const id = `${place.id}-value`
  place.replaceChildren(
    h('p', {}, `${label} `, h('strong', {}, 'shown only now'), ': copy it and keep it safe.'),
    h(
      'p',
      {},
      h('code', { id }, value),
      ' ',
      h('button', { type: 'button', class: 'quiet', 'data-copy': id, 'aria-label': `Copy ${what}` }, 'Copy'),
    ),
  )
  place.querySelector('button').focus()
}
