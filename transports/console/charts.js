// Two small charts drawn as SVG, sized to their container: bars stacked by outcome over time,
// and a ranked list with a bar per entry. No library: both fit in a few kilobytes.
import { count, h } from './dom.js'

export const OUTCOMES = [
  { key: 'delivered', label: 'Delivered' },
  { key: 'deferred', label: 'Deferred' },
  { key: 'failed', label: 'Failed' },
  { key: 'refused', label: 'Refused' },
]

const HEIGHT = 220
const PAD = { top: 10, right: 8, bottom: 24, left: 44 }

/** A round maximum for the axis (1, 2 or 5 times a power of ten) at or above `n`. */
function niceMax(n) {
  if (n <= 5) return 5
  const power = 10 ** Math.floor(Math.log10(n))
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= n)
}

const label = (time, interval) => {
  const iso = new Date(time).toISOString()
  return interval === 'hour' ? `${iso.slice(5, 10)} ${iso.slice(11, 13)}h` : iso.slice(5, 10)
}

/** Bars per bucket, stacked by outcome, redrawn when the container's width changes. */
export function stackedBars(container, { buckets, interval }) {
  const draw = () => {
    const width = Math.max(280, container.clientWidth)
    const plotW = width - PAD.left - PAD.right
    const plotH = HEIGHT - PAD.top - PAD.bottom
    const total = (b) => OUTCOMES.reduce((sum, o) => sum + (b[o.key] ?? 0), 0)
    const max = niceMax(Math.max(0, ...buckets.map(total)))
    const y = (n) => PAD.top + plotH - (n / max) * plotH
    const band = plotW / Math.max(1, buckets.length)
    const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => {
      const v = Math.round(max * f)
      return h(
        'g',
        { class: 'tick' },
        h('line', { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v) }),
        h('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, count(v)),
      )
    })
    // One time label per ~70 px, so that they never overlap.
    const every = Math.max(1, Math.ceil(70 / band))
    const bars = buckets.map((b, i) => {
      const x = PAD.left + i * band + band * 0.1
      let base = 0
      const parts = OUTCOMES.filter((o) => b[o.key] > 0).map((o) => {
        const top = base + b[o.key]
        const rect = h('rect', {
          class: o.key,
          x,
          y: y(top),
          width: Math.max(1, band * 0.8),
          height: Math.max(0, y(base) - y(top)),
        })
        base = top
        return rect
      })
      const tip = `${label(b.time, interval)}: ${OUTCOMES.map((o) => `${o.label.toLowerCase()} ${b[o.key] ?? 0}`).join(', ')}`
      return h(
        'g',
        {},
        h('title', {}, tip),
        h('rect', { class: 'hit', x: PAD.left + i * band, y: PAD.top, width: band, height: plotH }),
        parts,
        i % every === 0 &&
          h('text', { class: 'x', x: x + band * 0.4, y: HEIGHT - 6, 'text-anchor': 'middle' }, label(b.time, interval)),
      )
    })
    container.replaceChildren(
      h(
        'svg',
        { width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: 'img', 'aria-label': summary(buckets) },
        grid,
        bars,
      ),
      legend(buckets),
      table(buckets, interval),
    )
  }
  draw()
  container.chartObserver?.disconnect()
  let lastWidth = container.clientWidth
  container.chartObserver = new ResizeObserver(() => {
    if (container.clientWidth !== lastWidth) (lastWidth = container.clientWidth), draw()
  })
  container.chartObserver.observe(container)
}

const sumOf = (buckets, key) => buckets.reduce((sum, b) => sum + (b[key] ?? 0), 0)

const summary = (buckets) =>
  `Volume over ${buckets.length} intervals: ${OUTCOMES.map((o) => `${sumOf(buckets, o.key)} ${o.label.toLowerCase()}`).join(', ')}`

function legend(buckets) {
  return h(
    'ul',
    { class: 'legend' },
    h('li', {}, `Accepted ${count(sumOf(buckets, 'accepted'))}`),
    OUTCOMES.map((o) =>
      h(
        'li',
        {},
        h('span', { class: `swatch ${o.key}`, 'aria-hidden': 'true' }),
        `${o.label} ${count(sumOf(buckets, o.key))}`,
      ),
    ),
  )
}

/** The same numbers as a table, for screen readers and for reading exact counts. */
function table(buckets, interval) {
  const keys = ['accepted', ...OUTCOMES.map((o) => o.key)]
  return h(
    'details',
    {},
    h('summary', {}, 'Show as a table'),
    h(
      'div',
      { class: 'scroll' },
      h(
        'table',
        {},
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, interval === 'hour' ? 'Hour (UTC)' : 'Day (UTC)'),
            keys.map((k) => h('th', { scope: 'col' }, k)),
          ),
        ),
        h(
          'tbody',
          {},
          buckets.map((b) =>
            h(
              'tr',
              {},
              h('th', { scope: 'row' }, label(b.time, interval)),
              keys.map((k) => h('td', {}, count(b[k] ?? 0))),
            ),
          ),
        ),
      ),
    ),
  )
}

/** The top entries of a `{name: count}` map as a ranked list, each with a bar to scale. */
export function rankedBars(list, counts, limit = 10) {
  const entries = Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
  const max = entries[0]?.[1] ?? 0
  list.replaceChildren(
    ...(entries.length
      ? entries.map(([name, n]) =>
          h(
            'li',
            {},
            h('span', { class: 'name' }, name || '<> (bounce reports)'),
            h('span', { class: 'count' }, count(n)),
            h(
              'svg',
              { class: 'bar', 'aria-hidden': 'true' },
              h('rect', { width: `${(n / max) * 100}%`, height: '100%' }),
            ),
          ),
        )
      : [h('li', { class: 'empty' }, 'None in this window.')]),
  )
}
