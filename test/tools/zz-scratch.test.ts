import { it } from 'vitest'
import { toEpochSeconds } from '../../tools/view-mail-log.js'

it('scratch', async () => {
  const now = Date.UTC(2026, 10, 22, 12, 0, 0)
  const now2 = Date.UTC(2026, 10, 22, 23, 30, 0)
  const now3 = Date.UTC(2026, 10, 22, 0, 30, 0)
  for (const n of [now, now2, now3])
  for (const s of ['yesterday', '2026-11-21', 'last monday', 'today', '2026-11-21 10:00', 'Nov 21 2026', '2024-02-30', '2026-11-21T10:00:00+02:00', 'next friday', 'tomorrow', '3 days ago']) {
    try { console.log(new Date(n).toISOString(), s, new Date(toEpochSeconds('startDate', s, 'start', n)*1000).toISOString(), new Date(toEpochSeconds('endDate', s, 'end', n)*1000).toISOString()) } catch (e) { console.log(s, 'ERR', (e as Error).message) }
  }
})
