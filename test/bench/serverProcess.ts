/**
 * The fake OpenAI-compatible server of fakeServerChild.ts, started in a child process (its CPU is
 * not the bench's) from the compiled package the benches load.
 * @module
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface ServerProcess extends AsyncDisposable {
  /** The base URL to pass to `openaiModel`. */
  url: string;
  close(): Promise<void>;
}

/** Start the fake server answering each request after [minMs, maxMs] ms. */
export async function startServerProcess(minMs: number, maxMs = minMs): Promise<ServerProcess> {
  const script = fileURLToPath(new URL('../../dist/test/bench/fakeServerChild.js', import.meta.url));
  const child = spawn(process.execPath, [script, String(minMs), String(maxMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the fake server exited with ${code} before it listened`)));
  });
  lines.close();
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill();
    await exited;
  };
  return { url, close, [Symbol.asyncDispose]: close };
}
