/**
 * How the threshold triggers measure the host: the disk and load probes, injectable so tests do not
 * depend on the machine they run on. A probe may throw or return a non-finite number; the manager
 * treats both as a failed probe (logged and audited, no event).
 * @module
 */
import { promises as fsp } from 'node:fs';
import os from 'node:os';

export interface ProactiveProbes {
  /** Default: `fs.promises.statfs`, used / (used + available to unprivileged users), as `df` shows. */
  disk?: (path: string) => Promise<{ usedPct: number }>;
  /** Default: `os.loadavg()[0] / os.cpus().length` (always 0 on Windows). */
  load?: () => { perCore: number };
}

/** The default disk probe: used / (used + available to unprivileged users), in percent, as `df` shows. */
export async function defaultDiskProbe(path: string): Promise<{ usedPct: number }> {
  const s = await fsp.statfs(path);
  const used = s.blocks - s.bfree;
  const total = used + s.bavail;
  return { usedPct: total > 0 ? (used / total) * 100 : 0 };
}

/** The default load probe: the 1-minute load average per CPU (always 0 on Windows). */
export function defaultLoadProbe(): { perCore: number } {
  const [load1 = 0] = os.loadavg();
  return { perCore: load1 / Math.max(1, os.cpus().length) };
}
