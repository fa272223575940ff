/**
 * The views family put together: the read model and its events, the run's live stream (written
 * with the group commit), and what subscribers hear of the MCP servers.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { ToolCatalog } from '../../mcp/catalog.js';
import type { StorePort } from '../../store/port.js';
import type { Agents } from '../agents/agents.js';
import type { GroupCommitter } from '../commit.js';
import type { Mailboxes } from '../mail/mailbox.js';
import type { ResolvedOptions } from '../options.js';
import { runStream } from './streamRecorder.js';
import { Views } from './views.js';

export interface ViewFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: Pick<ResolvedOptions, 'stream' | 'strictMcp'>;
  readonly port: StorePort;
  /** A resumed run's restored agents and which its stream does not show (it continues where it stopped), null for a new run. */
  readonly restored: { agents: Map<string, string>; unshown: Map<string, string | null> | null } | null;
  readonly agents: Agents;
  readonly mailboxes: Pick<Mailboxes, 'count'>;
  readonly committer: Pick<GroupCommitter, 'stage' | 'after' | 'beforeCommit'>;
  readonly catalog: Pick<ToolCatalog, 'onServerStatus'>;
}

export function wireViews(p: ViewFamilyPorts) {
  const { clock, committer } = p;
  const views = new Views({ agents: p.agents, clock, logger: p.logger, pending: (id) => p.mailboxes.count(id), after: (effect) => committer.after(effect) });
  const stream = runStream({ runId: p.runId, settings: p.options.stream, port: p.port, restored: p.restored, logger: p.logger, committer, views });
  // An MCP server down or back: a view or a script hears of it (the log has the detail). Under
  // strictMcp a failed start is start()'s error instead (only a first start ends as `failed`).
  p.catalog.onServerStatus(({ server, state, tools, error }) => {
    if (state === 'starting' || (state === 'failed' && p.options.strictMcp)) return;
    views.emit({ type: 'mcp.server', server, state, tools, error, at: clock.now() });
  });
  return { views, stream };
}
