/**
 * Headless Chromium for the dashboard's tests (playwright-core with the system's chromium). Where
 * there is no Chromium the tests skip, saying so in one line; with TROUPE_REQUIRE_BROWSER=1 (CI)
 * they run anyway and a browser that cannot start fails them.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

const CHROMIUM = process.env.TROUPE_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'];

const BROWSER_REQUIRED = process.env.TROUPE_REQUIRE_BROWSER === '1';
/** Whether the browser suite runs here. */
export const BROWSER = BROWSER_REQUIRED || existsSync(CHROMIUM);
if (!BROWSER) {
  process.stderr.write(
    `browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or set TROUPE_CHROMIUM; TROUPE_REQUIRE_BROWSER=1 makes this a failure)\n`,
  );
}

export const launch = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, args: ARGS });

/** Where the tests save a screenshot of each main view (not committed). */
const SHOTS = fileURLToPath(new URL('../../test-results/dashboard/', import.meta.url));
export function shot(name: string): string {
  mkdirSync(SHOTS, { recursive: true });
  return `${SHOTS}${name}.png`;
}
