import { request, session } from './api.js'
import { $, fail, say } from './dom.js'

const form = $('#sign-in')
const notice = session.notice()
if (notice) notice.error ? fail(notice.text) : say(notice.text)

form.addEventListener('submit', async (event) => {
  event.preventDefault()
  const key = form.elements.key.value.trim()
  const button = form.querySelector('button')
  button.disabled = true
  try {
    // The key is kept only once the API has taken it.
    await request('GET', '/mail', { key })
    session.keep(key)
    location.assign(session.next())
  } catch (err) {
    fail(err.status === 401 ? 'That API key was refused: check it and try again.' : err.message)
    form.elements.key.select()
  } finally {
    button.disabled = false
  }
})
