import { hourOf, VOLUME_COUNTS, type VolumeCounts } from './store.js'

export type VolumeRow = VolumeCounts & { orderId: number; hourStart: number }

/**
 * The volume index's counts of one transaction, added up in memory per order and hour as its
 * messages, outcomes and refusals are written: the backend then adds them to the index with one
 * row per order and hour, however many messages the commit holds.
 */
export function volumeTally() {
  const rows = new Map<string, VolumeRow>()
  return {
    add(orderId: number, time: number, what: keyof VolumeCounts, n = 1): void {
      const hourStart = hourOf(time)
      const key = `${orderId} ${hourStart}`
      let row = rows.get(key)
      if (!row) {
        row = { orderId, hourStart, ...Object.fromEntries(VOLUME_COUNTS.map((c) => [c, 0])) } as VolumeRow
        rows.set(key, row)
      }
      row[what] += n
    },
    rows: (): VolumeRow[] => [...rows.values()],
    clear: () => rows.clear(),
  }
}

export type VolumeTally = ReturnType<typeof volumeTally>
