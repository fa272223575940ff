/**
 * `troupe replay <run>` (issue 37): re-run a recorded run offline with the recorded answers and
 * tool results (its MCP servers' too: none is started), through this troupe and the run's saved settings, and say whether it asks exactly
 * what the recording holds (exit 0) or where it first differs (exit 1): a regression check of a
 * troupe upgrade or a settings change against yesterday's runs. No model is called (until
 * `--live-from`: from that agent's turn on the live model answers, outcome "live"), nothing is
 * written: the database is opened read-only.
 * @module
 */
import { ConfigError } from '../errors.js';
import type { Model } from '../model/types.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, type CliConfig } from './config.js';
import { parseAgentTurn } from './fork.js';
import { replayRun } from '../replay/replayRun.js';
import type { Io } from './args.js';
import { DEMO_MODEL, DEMO_PRICE } from './demoModel.js';
import { EXIT } from './exitCodes.js';
import type { Values } from './flags.js';
import { findAgent, findRun, openRuns, savedSettings } from './runs.js';
import { DEMO_CONFIG } from './runCommands.js';
import { coordinatorOptions, fromFlags, modelFor, secrets } from './setup.js';
import { forTerminal, jsonLine } from './terminal.js';

export async function replay(args: string[], values: Values, io: Io): Promise<number> {
  const [runId] = args;
  if (!runId) throw new ConfigError('Usage: troupe replay <run> [--db <path|url>] [--config <file>] [--json] [--live-from <agent>:<turn>]');
  const liveAt = values.liveFrom === undefined ? null : parseAgentTurn(values.liveFrom, '--live-from');
  if (liveAt === null && (values.model ?? values.baseUrl ?? values.apiKey) !== undefined) {
    throw new ConfigError('--model, --base-url and --api-key choose the live model of --live-from: without it no model is called');
  }
  const runs = await openRuns(values, io, { readOnly: true });
  try {
    const run = await findRun(runs, runId);
    const saved = await savedSettings(runs, run.id);
    // MCP servers are not saved with a run (secrets): their names and overrides come from the
    // config file again, as for resume; none is started.
    const config = { ...(saved.demo ? { ...DEMO_CONFIG, ...saved } : saved), ...defined({ mcpServers: loadConfigFile(values.config).mcpServers }) };
    // Offline: no MCP server is started (replayRun offers its recorded tools and answers them from
    // the recording), no auxiliary model is made (its name declares how its recorded calls are priced).
    const options = coordinatorOptions({ ...config, auxiliaryModel: undefined });
    const liveFrom =
      liveAt === null
        ? undefined
        : { agent: (await findAgent(runs, run, liveAt.agent)).name, turn: liveAt.turn, model: liveModel(config, values, io, saved.demo === true) };
    const result = await replayRun(runs.reads, run.id, {
      ...(liveFrom ? { liveFrom } : {}),
      coordinator: { ...options, ...(saved.demo ? { retry: { baseDelayMs: 200 } } : {}) },
      model: {
        name: config.model ?? 'replay',
        ...(saved.demo || config.model === DEMO_MODEL ? { price: DEMO_PRICE } : {}),
        ...(config.maxOutputTokens === undefined ? {} : { maxOutputTokens: config.maxOutputTokens }),
        ...(config.contextWindow === undefined ? {} : { contextWindow: config.contextWindow }),
      },
      ...(config.auxiliaryModel === undefined
        ? {}
        : {
            auxiliaryModel: {
              name: config.auxiliaryModel,
              ...(config.maxOutputTokens === undefined ? {} : { maxOutputTokens: config.maxOutputTokens }),
              ...(config.contextWindow === undefined ? {} : { contextWindow: config.contextWindow }),
            },
          }),
    });
    const { outcome, divergence, calls, inputs } = result;
    if (values.json) io.out.write(`${jsonLine({ runId: run.id, outcome, divergence, calls, inputs })}\n`);
    else if (outcome === 'live')
      io.out.write(
        `run ${run.id}: identical up to ${liveFrom!.agent}'s turn ${liveFrom!.turn} (${calls} model calls and ${inputs} inputs replayed), then live\n`,
      );
    else if (!divergence) io.out.write(`run ${run.id}: identical (${calls} model calls and ${inputs} inputs replayed)\n`);
    else {
      io.out.write(
        forTerminal(
          `run ${run.id}: diverged at ${divergence.agent} (${divergence.agentId}) turn ${divergence.turn}, a different ${divergence.kind}: ${divergence.diff}`,
        ) + `\n`,
      );
    }
    return divergence ? EXIT.RUN_NOT_COMPLETED : EXIT.OK;
  } finally {
    await runs.close();
  }
}

/** The live model of `--live-from`: the flags over the environment over the run's saved settings (a demo run's model is scripted: it needs --model). */
function liveModel(saved: CliConfig, values: Values, io: Io, demo: boolean): Model {
  if (demo && values.model === undefined)
    throw new ConfigError("--live-from on a demo run needs a live model: --model and --base-url (the demo's model is scripted)");
  const config = mergeConfig(
    demo ? {} : saved,
    fromEnv(io.env),
    fromFlags({ model: values.model, baseUrl: values.baseUrl, apiKey: values.apiKey }, values.model ?? saved.model),
  );
  secrets(io, config);
  return modelFor(config);
}
