/**
 * A strict reader of the Prometheus text exposition format (0.0.4), as a scraper reads it: throws,
 * naming the line, at anything it would refuse. Each family has at most one HELP and one TYPE, the
 * TYPE before its samples, and its samples together; a histogram's buckets are cumulative, end at
 * `+Inf`, and that bucket equals its `_count`.
 */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Family {
  name: string
  type: string
  help: string
  samples: Sample[]
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*'
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"'
// As Prometheus reads a value (Go's strconv.ParseFloat): NaN and Inf in any case (prom-client writes `Nan`).
const VALUE = '(?:[-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|[nN][aA][nN]|[+-]?[iI][nN][fF])'
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL}=${LABEL_VALUE}(?:,|(?=\\})))*)\\})? (${VALUE})(?: -?\\d+)?$`)
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped'])
const SUFFIXES: Record<string, string[]> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
}

const number = (s: string) =>
  /inf$/i.test(s) ? (s.startsWith('-') ? -Infinity : Infinity) : /^nan$/i.test(s) ? Number.NaN : Number(s)
const unquote = (s: string) => s.slice(1, -1).replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c))

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>()
  const closed = new Set<string>()
  let current: Family | undefined
  const fail = (n: number, why: string): never => {
    throw new Error(`line ${n + 1}: ${why}: ${JSON.stringify(text.split('\n')[n])}`)
  }
  const family = (name: string, n: number) => {
    if (closed.has(name)) fail(n, `${name} appears again after other metrics`)
    if (current && current.name !== name) closed.add(current.name)
    let f = families.get(name)
    if (!f) families.set(name, (f = { name, type: 'untyped', help: '', samples: [] }))
    current = f
    return f
  }
  if (!text.endsWith('\n')) throw new Error('the text does not end with a line feed')
  text
    .slice(0, -1)
    .split('\n')
    .forEach((line, n) => {
      if (line === '') return
      const meta = new RegExp(`^# (HELP|TYPE) (${NAME}) ?(.*)$`).exec(line)
      if (meta) {
        const [, kind, name, rest] = meta
        const f = family(name, n)
        if (kind === 'TYPE') {
          if (!TYPES.has(rest)) fail(n, `unknown type ${rest}`)
          if (f.samples.length || f.type !== 'untyped') fail(n, 'TYPE after samples, or twice')
          f.type = rest
        } else {
          if (f.help) fail(n, 'HELP twice')
          f.help = rest
        }
        return
      }
      if (line.startsWith('#')) return
      const m = SAMPLE.exec(line) ?? fail(n, 'not a sample line')
      const [, name, labelText = '', value] = m
      const labels: Record<string, string> = {}
      for (const [, k, v] of labelText.matchAll(new RegExp(`(${LABEL})=(${LABEL_VALUE})`, 'g'))) {
        if (k in labels) fail(n, `label ${k} twice`)
        labels[k] = unquote(v)
      }
      const owner =
        [...families.values()].find((f) =>
          (SUFFIXES[f.type] ?? ['']).some((suffix) => `${f.name}${suffix}` === name),
        ) ?? family(name, n)
      if (owner !== current) family(owner.name, n)
      owner.samples.push({ name, labels, value: number(value) })
    })
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f)
  return families
}

function checkHistogram(f: Family): void {
  const key = (labels: Record<string, string>) =>
    JSON.stringify(
      Object.entries(labels)
        .filter(([k]) => k !== 'le')
        .sort(),
    )
  const series = new Map<string, Sample[]>()
  for (const s of f.samples.filter((s) => s.name.endsWith('_bucket'))) {
    if (!('le' in s.labels)) throw new Error(`${f.name}: a bucket without le`)
    series.set(key(s.labels), [...(series.get(key(s.labels)) ?? []), s])
  }
  for (const [labels, buckets] of series) {
    const bounds = buckets.map((b) => number(b.labels.le))
    if (bounds.at(-1) !== Infinity) throw new Error(`${f.name}${labels}: no +Inf bucket`)
    for (let i = 1; i < buckets.length; i++) {
      if (!(bounds[i] > bounds[i - 1])) throw new Error(`${f.name}${labels}: bucket bounds not increasing`)
      if (buckets[i].value < buckets[i - 1].value) throw new Error(`${f.name}${labels}: buckets not cumulative`)
    }
    const count = f.samples.find((s) => s.name === `${f.name}_count` && key(s.labels) === labels)
    if (count?.value !== buckets.at(-1)!.value) throw new Error(`${f.name}${labels}: +Inf bucket differs from _count`)
  }
}

/** The value of one series (a sample with exactly these labels), or undefined. */
export function seriesValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}) {
  for (const f of families.values()) {
    const sample = f.samples.find(
      (s) =>
        s.name === name &&
        Object.keys(s.labels).length === Object.keys(labels).length &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )
    if (sample) return sample.value
  }
  return undefined
}
