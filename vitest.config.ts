import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    setupFiles: ['test/helpers/setup.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: { name: 'property', include: ['test/property/**/*.test.ts'], testTimeout: 60_000 },
      },
      {
        extends: true,
        test: { name: 'integration', include: ['test/integration/**/*.test.ts'], testTimeout: 60_000 },
      },
      {
        extends: true,
        test: { name: 'bench', include: [], benchmark: { include: ['test/bench/**/*.bench.ts'] } },
      },
    ],
  },
});
