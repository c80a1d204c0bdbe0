import { api } from './api.js'
import { $, guard, h } from './dom.js'
import { start } from './shell.js'

/** The password, fetched only when asked for, with a copy button; Hide puts the button back. */
function passwordField(order) {
  const dd = h('dd', {})
  const hidden = () =>
    dd.replaceChildren(
      h(
        'button',
        { type: 'button', class: 'quiet', 'aria-label': `Show the password of ${order.username}`, onclick: show },
        'Show password',
      ),
    )
  async function show() {
    await guard(async () => {
      const detail = await api('GET', `/mail/${order.id}`)
      const id = `password-${order.id}`
      const hide = h('button', { type: 'button', class: 'quiet', onclick: hidden }, 'Hide')
      // A key that may not send this order's mail is not shown its password: say why, offer nothing to copy.
      if (detail.passwordWithheld)
        return dd.replaceChildren(h('span', { id }, `Withheld: ${detail.passwordWithheld}.`), ' ', hide)
      dd.replaceChildren(
        h('code', { id }, detail.password),
        ' ',
        h(
          'button',
          { type: 'button', class: 'quiet', 'data-copy': id, 'aria-label': `Copy the password of ${order.username}` },
          'Copy',
        ),
        ' ',
        hide,
      )
    })
  }
  hidden()
  return dd
}

function card(order) {
  const userId = `username-${order.id}`
  return h(
    'li',
    { class: 'card' },
    h(
      'h3',
      {},
      order.username,
      ' ',
      h('span', { class: `badge ${order.status}` }, order.status),
      order.sandbox && h('span', { class: 'badge sandbox' }, 'sandbox'),
    ),
    order.comment && h('p', {}, order.comment),
    h(
      'dl',
      { class: 'settings' },
      h(
        'div',
        {},
        h('dt', {}, 'Username'),
        h(
          'dd',
          {},
          h('code', { id: userId }, order.username),
          ' ',
          h(
            'button',
            {
              type: 'button',
              class: 'quiet',
              'data-copy': userId,
              'aria-label': `Copy the username of ${order.username}`,
            },
            'Copy',
          ),
        ),
      ),
      h('div', {}, h('dt', {}, 'Password'), passwordField(order)),
    ),
  )
}

start(async () => {
  const orders = await api('GET', '/mail')
  $('#orders').replaceChildren(
    ...(orders.length ? orders.map(card) : [h('li', {}, 'This account has no mail orders.')]),
  )
})
