// A message's HTML made safe to show: parsed into an inert document (DOMParser runs no script
// and loads nothing), then rebuilt from an allowlist of elements and attributes. No script,
// style, form, frame or remote image survives, nor any `on…` attribute or script URL. The result
// is shown in a sandboxed frame without scripts, under a Content-Security-Policy of its own.

const KEEP = new Set(
  (
    'a abbr b bdi bdo blockquote br caption center cite code col colgroup dd del dfn div dl dt em font ' +
    'h1 h2 h3 h4 h5 h6 hr i ins kbd li mark ol p pre q s samp small span strike strong sub sup table ' +
    'tbody td tfoot th thead time tr tt u ul var'
  ).split(' '),
)
/** Elements dropped with everything in them; any other unknown element is replaced by its content. */
const DROP = new Set(
  'script style noscript template iframe frame frameset object embed applet form input button select textarea head title svg math link meta base'.split(
    ' ',
  ),
)
const ATTRIBUTES = new Set(['href', 'title', 'alt', 'colspan', 'rowspan', 'lang', 'dir', 'align'])
const LINK = /^(https?:|mailto:)/i

/** A frame's document for the HTML: the kept elements, under a policy that loads nothing. */
export function safeDocument(html) {
  const source = new DOMParser().parseFromString(html, 'text/html')
  const body = document.implementation.createHTMLDocument('').body
  copy(source.body, body)
  return (
    '<!doctype html><html><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'">` +
    `</head><body>${body.innerHTML}</body></html>`
  )
}

function copy(from, to) {
  for (const node of from.childNodes) {
    if (node.nodeType === Node.TEXT_NODE) to.append(node.textContent)
    if (node.nodeType !== Node.ELEMENT_NODE) continue
    const tag = node.localName
    if (DROP.has(tag)) continue
    // An image would load (a tracking pixel): its text stands in for it.
    if (tag === 'img') {
      const alt = node.getAttribute('alt')
      if (alt) to.append(`[${alt}]`)
      continue
    }
    if (!KEEP.has(tag)) {
      copy(node, to)
      continue
    }
    const el = to.ownerDocument.createElement(tag)
    for (const { name, value } of node.attributes) {
      if (!ATTRIBUTES.has(name)) continue
      if (name === 'href' && !LINK.test(value.trim())) continue
      el.setAttribute(name, value)
    }
    if (tag === 'a') el.setAttribute('rel', 'noopener noreferrer')
    copy(node, el)
    to.append(el)
  }
}
