// What every signed-in page does: leave for the sign-in page without a key, sign out, copy
// buttons, and run the page's first load.
import { session } from './api.js'
import { $, guard, say } from './dom.js'

/** Starts a signed-in page: `load` fills it from the API. */
export function start(load) {
  if (!session.key()) return session.end({ text: 'Sign in to use the console.' })
  $('#sign-out').addEventListener('click', () =>
    session.end({ text: 'You signed out: this tab no longer has the key.' }),
  )
  document.addEventListener('click', (event) => {
    const button = event.target.closest('[data-copy]')
    if (button) copy(document.getElementById(button.dataset.copy))
  })
  return guard(load)
}

/** Copies an element's text: the Clipboard API where the page is a secure context, else the selection. */
async function copy(el) {
  const text = el.textContent
  try {
    await navigator.clipboard.writeText(text)
  } catch {
    const range = document.createRange()
    range.selectNodeContents(el)
    getSelection().removeAllRanges()
    getSelection().addRange(range)
    if (!document.execCommand('copy')) return say('Selected: press Ctrl+C (⌘C) to copy.')
  }
  say('Copied.')
}
