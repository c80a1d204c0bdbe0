/**
 * The known name that `name` was most likely meant to be: one that differs only in case, else the
 * nearest within a typo or two (a character wrong, missing or extra, or two side by side
 * swapped), or undefined when none is that near. A short name gets fewer edits, so that `to`
 * does not suggest `cc`.
 */
export function didYouMean(name: string, known: readonly string[]): string | undefined {
  const upper = name.toUpperCase()
  const sameButCase = known.find((k) => k.toUpperCase() === upper)
  if (sameButCase) return sameButCase
  const allowed = Math.min(2, Math.floor(name.length / 4))
  let best: { name: string; distance: number } | undefined
  for (const k of known) {
    const distance = editDistance(upper, k.toUpperCase())
    if (distance <= allowed && (!best || distance < best.distance)) best = { name: k, distance }
  }
  return best?.name
}

/** Edits from `a` to `b`: insertions, deletions, substitutions and swaps of neighbours (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  )
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  return d[a.length][b.length]
}
