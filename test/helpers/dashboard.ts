/** Databases and HTTP calls for the dashboard's tests. */
import { request } from 'node:http';
import { join } from 'node:path';
import { runCli } from '../../src/cli/program.js';
import type { Io } from '../../src/cli/args.js';
import { workdir } from './cli.js';

/** Output streams that keep what was written. */
export function captureIo(): Io & { text: () => { out: string; err: string } } {
  let out = '';
  let err = '';
  return {
    out: { write: (t: string) => void (out += t) },
    err: { write: (t: string) => void (err += t) },
    env: {},
    tty: false,
    text: () => ({ out, err }),
  };
}

/** The offline demo run into a fresh database (in this process): five agents, the reserve trips. */
export async function demoDb(): Promise<string> {
  const db = join(workdir(), 'demo.db');
  const io = captureIo();
  const code = await runCli(['demo', '--db', db, '--json'], io);
  if (code !== 0) throw new Error(`the demo exited ${code}: ${io.text().err}`);
  return db;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request to 127.0.0.1:`port` with the given headers (Host included, to forge it). */
export function call(port: number, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
