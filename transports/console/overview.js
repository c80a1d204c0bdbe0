import { api } from './api.js'
import { rankedBars, stackedBars } from './charts.js'
import { $, count, h, valuesOf } from './dom.js'
import { start } from './shell.js'

/** Runs a section's load, showing its error in the section itself. */
async function section(place, load) {
  try {
    await load()
  } catch (err) {
    place.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message))
  }
}

const money = (amount, currency) => new Intl.NumberFormat('en', { style: 'currency', currency }).format(amount)

async function usage() {
  const stats = await api('GET', '/mail/stats', { query: { time: 'billing' } })
  $('#usage').textContent = count(stats.usage)
  // Shown only where the operator set a price (the page has no place for it otherwise).
  const cost = $('#cost')
  if (cost) cost.textContent = money(stats.cost, stats.currency)
  // Over the billing cycle every message accepted is received, and all but sandbox mail and reports
  // to senders is usage.
  const sandbox = stats.received - stats.usage
  $('#sandbox').textContent = count(sandbox)
  $('#sandbox-figure').hidden = sandbox === 0
  return stats
}

async function volume() {
  const chart = $('#volume-chart')
  await section(chart, async () => {
    const v = await api('GET', '/mail/volume', { query: valuesOf($('#volume-form')) })
    $('#volume-caption').textContent =
      `By ${v.interval}, ${v.startTime.slice(0, 16).replace('T', ' ')} to ${v.endTime.slice(0, 16).replace('T', ' ')} UTC`
    stackedBars(chart, v)
  })
}

async function top(stats) {
  await section($('#top-summary'), async () => {
    const s = stats ?? (await api('GET', '/mail/stats', { query: valuesOf($('#top-form')) }))
    $('#top-summary').textContent = `${count(s.received)} messages received, ${count(s.sent)} deliveries made.`
    rankedBars($('#top-to'), s.volume.to)
    rankedBars($('#top-from'), s.volume.from)
  })
}

start(async () => {
  $('#volume-form').addEventListener('submit', (e) => (e.preventDefault(), volume()))
  $('#top-form').addEventListener('submit', (e) => (e.preventDefault(), top()))
  // The window shown first is the billing cycle: one answer fills the figures and the top lists.
  const [stats] = await Promise.all([usage(), volume()])
  await top($('#top-form').elements.time.value === 'billing' ? stats : undefined)
})
