import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { listenOnLoopback } from '../../../src/inspect/guard.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))));
});
const server = () => {
  const s = createServer();
  servers.push(s);
  return s;
};

describe('listenOnLoopback (the dashboard and the inspector bind through it)', () => {
  it('binds 127.0.0.1, any free port for 0, and says which', async () => {
    const s = server();
    const port = await listenOnLoopback(s, 0, 'Dashboard');
    expect(port).toBeGreaterThan(0);
    expect(s.address()).toMatchObject({ address: '127.0.0.1', port });
  });

  it('a busy port is one CONFIG_INVALID line naming the server, the port and the hint', async () => {
    const busy = await listenOnLoopback(server(), 0, 'first');
    const second = server();
    const failed = await listenOnLoopback(second, busy, 'Dashboard', ' (pick another)').then(
      () => null,
      (err: unknown) => err,
    );
    expect(failed).toMatchObject({ code: 'CONFIG_INVALID', message: `Dashboard: cannot listen on 127.0.0.1:${busy}: the port is in use (pick another)` });
    expect(second.listening).toBe(false);
  });

  it('once listening, an error on the server is not an unhandled one', async () => {
    const s = server();
    await listenOnLoopback(s, 0, 'Dashboard');
    expect(s.listenerCount('error')).toBe(1);
    expect(() => s.emit('error', new Error('a socket failed'))).not.toThrow();
  });
});
