/**
 * What keeps a local web server (the inspector's bridge, the dashboard) to the person who started
 * it: bound to 127.0.0.1 by its caller, it refuses requests whose Host is not a loopback name (DNS
 * rebinding), requests from a page of another origin, and any request without the random token
 * that only the printed URL carries (compared in constant time). `listenOnLoopback` binds it.
 * @module
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import { ConfigError } from '../errors.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** A fresh secret for a server's URL: 192 bits, URL-safe. */
export const newToken = (): string => randomBytes(24).toString('base64url');

/** Whether a Host header names this machine's loopback interface (any port). */
export function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  return LOOPBACK_HOSTS.has(name.toLowerCase());
}

/** No Origin (not a browser, or a same-origin GET), or the page this server served (through whatever forwarded port). */
export function isAllowedOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/** Whether `given` is `token`, compared in constant time. */
function sameToken(given: string | null | undefined, token: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether the request's URL carries `token` (`?token=…`), compared in constant time. */
export function hasToken(req: IncomingMessage, token: string): boolean {
  try {
    return sameToken(new URL(req.url ?? '/', 'http://127.0.0.1').searchParams.get('token'), token);
  } catch {
    return false;
  }
}

/** A port to listen on: an integer from 0 (any free port) to 65535. */
export function checkPort(port: unknown, what: string): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigError(`Expected the ${what} port to be an integer from 0 to 65535, got ${String(port)}`);
  }
  return port;
}

/**
 * Listen on 127.0.0.1:`port` (0: any free port) and resolve with the port bound. A busy or
 * forbidden port is the user's to fix: one line of `CONFIG_INVALID` (`what` names the server,
 * `hint` may say how to pick another), not a crash. Once listening, a failing socket cannot take
 * the process down: clients are told nothing else.
 */
export async function listenOnLoopback(server: Server, port: number, what: string, hint = ''): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'the port is in use' : err.code === 'EACCES' ? 'permission denied' : err.message;
      reject(new ConfigError(`${what}: cannot listen on 127.0.0.1:${port}: ${why}${hint}`, { cause: err }));
    };
    server.once('error', onError);
    server.listen({ port, host: '127.0.0.1' }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', () => {});
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : port;
}
