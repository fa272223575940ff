/**
 * The quota's counters in PostgreSQL (table `provider_quota`, one row per endpoint): shared by every
 * worker of the cluster. A take is one atomic `UPDATE … RETURNING` (no read-modify-write race
 * between workers); the time passed in is the caller's clock, so workers' clocks should agree.
 * @module
 */
import type pg from 'pg';
import { QUOTA_WINDOW_MS, type QuotaLimits, type QuotaStore, type QuotaTake } from './quota.js';

/** Only the query the quota needs (a pool or a client). */
export type Queryable = Pick<pg.Pool, 'query'>;

const TAKE = `
  UPDATE provider_quota SET
    requests = (CASE WHEN window_start >= $2 THEN requests ELSE 0 END) + 1,
    tokens = (CASE WHEN window_start >= $2 THEN tokens ELSE 0 END) + $3,
    window_start = GREATEST(window_start, $2)
  WHERE endpoint = $1 AND paused_until <= $4
    AND ($5::bigint IS NULL OR (CASE WHEN window_start >= $2 THEN requests ELSE 0 END) + 1 <= $5)
    AND ($6::bigint IS NULL OR (CASE WHEN window_start >= $2 THEN tokens ELSE 0 END) = 0
         OR (CASE WHEN window_start >= $2 THEN tokens ELSE 0 END) + $3 <= $6)
  RETURNING 1`;

export function pgQuotaStore(db: Queryable): QuotaStore {
  const ensure = (endpoint: string) =>
    db.query('INSERT INTO provider_quota (endpoint, window_start, requests, tokens, paused_until) VALUES ($1, 0, 0, 0, 0) ON CONFLICT (endpoint) DO NOTHING', [
      endpoint,
    ]);
  return {
    async take(endpoint: string, window: number, tokens: number, limits: QuotaLimits, now: number): Promise<QuotaTake> {
      await ensure(endpoint);
      const took = await db.query(TAKE, [endpoint, window, tokens, now, limits.requestsPerMinute, limits.tokensPerMinute]);
      if (took.rowCount === 1) return { ok: true };
      const { rows } = await db.query<{ window_start: string; paused_until: string }>(
        'SELECT window_start, paused_until FROM provider_quota WHERE endpoint = $1',
        [endpoint],
      );
      const pausedUntil = Number(rows[0]?.paused_until ?? 0);
      if (pausedUntil > now) return { ok: false, retryAt: pausedUntil, pausedUntil };
      return { ok: false, retryAt: Math.max(Number(rows[0]?.window_start ?? 0), window) + QUOTA_WINDOW_MS, pausedUntil: null };
    },
    async adjust(endpoint: string, window: number, tokens: number): Promise<void> {
      await db.query('UPDATE provider_quota SET tokens = GREATEST(0, tokens + $3) WHERE endpoint = $1 AND window_start = $2', [endpoint, window, tokens]);
    },
    async pause(endpoint: string, until: number): Promise<void> {
      await db.query(
        `INSERT INTO provider_quota (endpoint, window_start, requests, tokens, paused_until) VALUES ($1, 0, 0, 0, $2)
         ON CONFLICT (endpoint) DO UPDATE SET paused_until = GREATEST(provider_quota.paused_until, $2)`,
        [endpoint, until],
      );
    },
  };
}
