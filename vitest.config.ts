import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Two files at a time, whatever the machine (vitest's default is one fewer than its cores: one
    // on a 2-core machine). Most files wait on sockets, child processes and timers more than they
    // compute, so a second file fills that time: on 2 cores with both taken by another job, the
    // suite took 8.3 min instead of 13-14.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
