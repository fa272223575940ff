import { defineConfig } from 'vitest/config';

/** Unit files that mock a module (vi.mock): they need a module graph of their own. */
const ISOLATED = ['test/unit/autonomy/proactive.test.ts'];

export default defineConfig({
  test: {
    // Vitest's default is one worker on a 2-core machine; most long files (kill -9 trials, CLI
    // children, PostgreSQL) wait on other processes and fsync, so two overlap them.
    maxWorkers: 2,
    setupFiles: ['test/helpers/setup.ts'],
    projects: [
      {
        extends: true,
        // One module graph per worker, not per file: importing it again for each of ~90 files was
        // 53 of the project's 57 s (measured; 20 s without). A file that mocks a module needs its
        // own graph: it is named in ISOLATED and runs in the next project.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], exclude: ISOLATED, isolate: false },
      },
      { extends: true, test: { name: 'unit-isolated', include: ISOLATED } },
      {
        extends: true,
        // 180 s: a safety net for hangs, not a speed check. The deadlock property (150 simulated
        // teams) took ~30 s at load 7 on 2 cores, and over 60 s at load 11 beside the kill -9 trials.
        // One module graph per worker, as for unit: 42 → 30 s (measured).
        test: { name: 'property', include: ['test/property/**/*.test.ts'], testTimeout: 180_000, isolate: false },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 60_000,
          // The crash harness runs compiled children: build once before the project runs.
          globalSetup: ['test/helpers/buildOnce.ts'],
        },
      },
      {
        extends: true,
        // The dashboard in headless Chromium (npm run test:browser; CI runs it with TROUPE_REQUIRE_BROWSER=1).
        test: { name: 'browser', include: ['test/browser/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 60_000, expect: { poll: { timeout: 15_000 } } },
      },
      {
        extends: true,
        // The resume benchmark runs a compiled child in a fresh process, and every bench loads dist/: build once first.
        // The benches load the compiled package as Node does (test/bench/compiled.ts): dist/ is not transformed.
        test: {
          name: 'bench',
          include: [],
          globalSetup: ['test/helpers/buildOnce.ts'],
          benchmark: { include: ['test/bench/**/*.bench.ts'] },
          // One file at a time: two benches side by side on 2 cores measure each other.
          fileParallelism: false,
          server: { deps: { external: [/\/dist\//] } },
        },
      },
    ],
  },
});
