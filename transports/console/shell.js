// What every signed-in page does: leave for the sign-in page without a key, sign out, copy
// buttons, and run the page's first load.
import { session } from './api.js'
import { $, guard, say } from './dom.js'

/**
 * Starts a signed-in page: `load` fills it from the API. The page's main part is marked busy
 * until that first load has ended, filled or failed: assistive technology announces it once, and
 * a test knows when the page is ready without waiting for the network to fall quiet.
 */
export async function start(load) {
  if (!session.key()) return session.end({ text: 'Sign in to use the console.' })
  $('#sign-out').addEventListener('click', () =>
    session.end({ text: 'You signed out: this tab no longer has the key.' }),
  )
  document.addEventListener('click', (event) => {
    const button = event.target.closest('[data-copy]')
    if (button) copy(document.getElementById(button.dataset.copy))
  })
  try {
    await guard(load)
  } finally {
    $('#main').removeAttribute('aria-busy')
  }
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
