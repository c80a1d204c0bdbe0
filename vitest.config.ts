import { BaseSequencer, type TestSpecification } from 'vitest/node'
import { defineConfig } from 'vitest/config'

/**
 * The files that start servers, browsers and child processes run first, the slowest known first
 * (vitest's own order: by the last run's durations, else by size), so that a long file never
 * starts last while the other worker sits idle; a clean clone has no durations yet.
 */
class HeavyFirst extends BaseSequencer {
  async sort(files: TestSpecification[]) {
    const heavy = (f: TestSpecification) => /\/test\/(system|console|bench)\//.test(f.moduleId)
    const sorted = await super.sort(files)
    return [...sorted.filter(heavy), ...sorted.filter((f) => !heavy(f))]
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Two files at a time, whatever the machine (vitest's default is one fewer than its cores: one
    // on a 2-core machine). Most files wait on sockets, child processes and timers more than they
    // compute, so a second file fills that time: on 2 cores with both taken by another job, the
    // suite took 8.3 min instead of 13-14.
    maxWorkers: 2,
    // Each worker loads the project's modules once, not once per file: importing them again for
    // each of the 126 files was a fifth of the suite's time and a third of its CPU. Tests restore
    // what they change (environment variables, spies, timers) and make their own servers and
    // stores, so files do not see each other's state.
    isolate: false,
    sequence: { sequencer: HeavyFirst },
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
