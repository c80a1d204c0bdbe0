import { api } from './api.js'
import { $, ask, guard, h, reveal, say, valuesOf } from './dom.js'
import { start } from './shell.js'

/** The password, fetched only when asked for, with a copy button; Hide puts the button back. */
function passwordField(order) {
  const dd = h('dd', {})
  const hidden = () =>
    dd.replaceChildren(
      h(
        'button',
        { type: 'button', class: 'quiet', 'aria-label': `Show password of ${order.username}`, onclick: show },
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
    order.status === 'active' && actions(order),
  )
}

/** Rotate and Cancel, each asked first: rotateOrderPassword and cancelMailOrder. */
function actions(order) {
  const name = order.username
  async function rotate() {
    if (!(await ask(`Replace the password of ${name}? The old one stops working at once.`, 'Replace'))) return
    await guard(async () => {
      const detail = await api('POST', `/mail/${order.id}/password`)
      await load()
      reveal($('#new-order-password'), `The new password of ${name} is`, detail.password, `the new password of ${name}`)
    })
  }
  async function cancel() {
    if (!(await ask(`Cancel ${name}? It sends no more mail, for good; its log stays.`, 'Cancel order'))) return
    await guard(async () => {
      await api('POST', `/orders/${order.id}/cancel`)
      await load()
      say(`${name} was canceled.`)
    })
  }
  return h(
    'div',
    { class: 'actions' },
    h(
      'button',
      { type: 'button', class: 'quiet', onclick: rotate, 'aria-label': `Replace password of ${name}` },
      'Replace password',
    ),
    h(
      'button',
      { type: 'button', class: 'quiet', onclick: cancel, 'aria-label': `Cancel order ${name}` },
      'Cancel order',
    ),
  )
}

async function load() {
  const orders = await api('GET', '/mail')
  $('#orders').replaceChildren(
    ...(orders.length ? orders.map(card) : [h('li', {}, 'This account has no mail orders.')]),
  )
}

start(async () => {
  const form = $('#add-order')
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    guard(async () => {
      const { comment, senders } = valuesOf(form)
      const order = await api('POST', '/orders', {
        body: {
          ...(comment ? { comment } : {}),
          senders: senders.split(/[\s,]+/).filter(Boolean),
          sandbox: form.elements.sandbox.checked,
        },
      })
      form.reset()
      await load()
      reveal(
        $('#new-order-password'),
        `${order.username} was created. Its SMTP password is`,
        order.password,
        `the password of ${order.username}`,
      )
    })
  })
  await load()
})
