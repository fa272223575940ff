/**
 * A TCP proxy to put between clients (worker processes) and PostgreSQL, driven from the test
 * process to inject network faults: latency, a partition, dropped connections, refused connections.
 *
 * Every connection is a pair of sockets (client side, upstream side) and two one-way pipes, each a
 * FIFO of chunks and end-of-stream marks that is pumped into the other socket:
 * - `delay(ms)` stamps each chunk `ms` after its arrival, in both directions, so a round trip
 *   grows by at least 2 × ms. Order is kept.
 * - `blackhole()` is a partition: nothing moves either way, not even a FIN or a reset (they are
 *   queued too), and connections stay open. New connections are accepted (the client's connect
 *   succeeds, as the proxy is on this side of the partition) but not connected upstream until the
 *   partition heals. Choice: what was sent during the partition is buffered and delivered on
 *   `pass()`, as TCP retransmission would deliver it after a real partition heals; a test that
 *   wants a partition that never heals closes the connections with `dropAll()`.
 * - `dropAll()` resets (RST) both sockets of every open connection at once, whatever the mode.
 * - `refuse()` resets every new connection as soon as it is accepted (the client sees ECONNRESET or
 *   "Connection terminated unexpectedly" rather than ECONNREFUSED: the port stays ours); open
 *   connections go on being forwarded.
 * - `pass()` heals: forward without delay, deliver anything held back.
 * A socket that closes without an orderly end (error, reset) is propagated as a reset of its peer,
 * through the same pipe, so it too is held by a partition. When the upstream cannot be reached
 * (the database is down), the client's connection is reset.
 *
 * The proxy never throws asynchronously: every socket and the server have an 'error' listener.
 * `close()` destroys every socket, clears every timer and closes the listening socket; the
 * listening socket is also unref'd, so a forgotten proxy does not keep the process alive by itself.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface FaultProxy {
  /** Listens on 127.0.0.1:<port>. */
  readonly port: number;
  /** The PostgreSQL URL `pgUrl` rewritten to connect through the proxy (host 127.0.0.1, our port). */
  url(pgUrl: string): string;
  /** Heal: forward without delay, delivering anything held back by a partition. */
  pass(): void;
  /** Forward, adding `ms` of latency to every chunk in both directions (a round trip: ≥ 2 × ms). */
  delay(ms: number): void;
  /** Partition: forward nothing either way (data, FIN, RST are held until `pass()`); accept new connections, hold them too. */
  blackhole(): void;
  /** Reset both sides of every open connection now; the mode is unchanged. */
  dropAll(): void;
  /** Reset every new connection on accept until `pass()` or `delay()`; open connections still forward. */
  refuse(): void;
  /** Connections open now, accepted and refused so far, bytes forwarded and bytes held back now (both directions). */
  stats(): { open: number; accepted: number; refused: number; bytes: number; held: number };
  /** Destroy every connection and stop listening. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

type Mode = 'forward' | 'blackhole' | 'refuse';
type Item = { kind: 'data'; chunk: Buffer; due: number } | { kind: 'end' | 'reset'; due: number };

/** One direction of a connection: what came from `source`, on its way to the peer. */
interface Pipe {
  readonly queue: Item[];
  queuedBytes: number;
  timer: NodeJS.Timeout | undefined;
  /** Waiting for the destination's 'drain'. */
  draining: boolean;
  /** We paused the source because too much is queued. */
  pausedSource: boolean;
}

interface Conn {
  readonly client: net.Socket;
  /** Created once the mode lets the connection through (not during a partition). */
  upstream: net.Socket | undefined;
  readonly up: Pipe; // client → upstream
  readonly down: Pipe; // upstream → client
}

/** Stop reading a source when this much is queued from it (a partition or a slow peer), resume below half. */
const HIGH_WATER = 1 << 20;

const newPipe = (): Pipe => ({ queue: [], queuedBytes: 0, timer: undefined, draining: false, pausedSource: false });
const ignore = () => undefined;

/** Start a proxy to `target` (`{ host, port }`, or a URL such as a PostgreSQL URL) on a free port of 127.0.0.1. */
export async function startFaultProxy(target: { host: string; port: number } | string): Promise<FaultProxy> {
  const to = typeof target === 'string' ? { host: new URL(target).hostname, port: Number(new URL(target).port || 5432) } : target;
  let mode: Mode = 'forward';
  let delayMs = 0;
  let closed = false;
  const conns = new Set<Conn>();
  const counts = { accepted: 0, refused: 0, bytes: 0 };

  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    client.on('error', ignore);
    if (closed || mode === 'refuse') {
      counts.refused++;
      client.resetAndDestroy();
      return;
    }
    counts.accepted++;
    const conn: Conn = { client, upstream: undefined, up: newPipe(), down: newPipe() };
    conns.add(conn);
    wire(conn, client, conn.up, 'up');
    client.on('close', () => {
      if (!conn.upstream)
        forget(conn); // never connected upstream (accepted during a partition): nothing to tell
      else if (conn.upstream.destroyed) forget(conn);
    });
    if (mode !== 'blackhole') connectUpstream(conn);
  });
  server.on('error', ignore);

  /** Queue what `source` says (data, end, reset) for the other side of `conn`. */
  function wire(conn: Conn, source: net.Socket, pipe: Pipe, dir: 'up' | 'down'): void {
    let ended = false;
    const push = (item: Item) => {
      pipe.queue.push(item);
      pump(conn, dir);
    };
    source.on('data', (chunk: Buffer) => {
      pipe.queuedBytes += chunk.length;
      if (pipe.queuedBytes > HIGH_WATER && !pipe.pausedSource) {
        pipe.pausedSource = true;
        source.pause();
      }
      push({ kind: 'data', chunk, due: performance.now() + delayMs });
    });
    source.on('end', () => {
      ended = true;
      push({ kind: 'end', due: performance.now() + delayMs });
    });
    source.on('close', () => {
      if (!ended) push({ kind: 'reset', due: performance.now() + delayMs });
    });
  }

  function connectUpstream(conn: Conn): void {
    if (conn.upstream || conn.client.destroyed) return;
    const upstream = net.connect({ host: to.host, port: to.port, allowHalfOpen: true, noDelay: true });
    upstream.on('error', ignore);
    conn.upstream = upstream;
    wire(conn, upstream, conn.down, 'down');
    upstream.on('close', () => {
      if (conn.client.destroyed) forget(conn);
    });
    pump(conn, 'up'); // what the client sent during a partition
  }

  /** Move what is due from a pipe into its destination, unless partitioned; schedule the rest. */
  function pump(conn: Conn, dir: 'up' | 'down'): void {
    const pipe = dir === 'up' ? conn.up : conn.down;
    const source = dir === 'up' ? conn.client : conn.upstream;
    const dest = dir === 'up' ? conn.upstream : conn.client;
    if (pipe.timer || pipe.draining || mode === 'blackhole' || closed || !dest) return;
    while (pipe.queue.length > 0) {
      if (dest.destroyed) {
        pipe.queue.length = 0; // the peer is gone: nothing to deliver to
        pipe.queuedBytes = 0;
        return;
      }
      const head = pipe.queue[0]!;
      const wait = head.due - performance.now();
      if (wait > 0) {
        // Timers may fire a little early: the callback pumps again, which re-checks the due time.
        pipe.timer = setTimeout(() => {
          pipe.timer = undefined;
          pump(conn, dir);
        }, Math.ceil(wait));
        return;
      }
      pipe.queue.shift();
      if (head.kind === 'end') dest.end();
      else if (head.kind === 'reset') dest.resetAndDestroy();
      else if (head.kind === 'data') {
        counts.bytes += head.chunk.length;
        pipe.queuedBytes -= head.chunk.length;
        if (pipe.pausedSource && pipe.queuedBytes < HIGH_WATER / 2) {
          pipe.pausedSource = false;
          source?.resume();
        }
        if (!dest.write(head.chunk)) {
          pipe.draining = true;
          dest.once('drain', () => {
            pipe.draining = false;
            pump(conn, dir);
          });
          return;
        }
      }
    }
  }

  function forget(conn: Conn): void {
    clearTimeout(conn.up.timer);
    clearTimeout(conn.down.timer);
    conns.delete(conn);
  }

  /** The mode changed: connect what a partition held back and deliver what is due. */
  function resume(): void {
    for (const conn of conns) {
      connectUpstream(conn);
      pump(conn, 'up');
      pump(conn, 'down');
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  const port = (server.address() as net.AddressInfo).port;

  const close = async () => {
    if (closed) return;
    closed = true;
    const done = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const conn of [...conns]) {
      conn.client.destroy();
      conn.upstream?.destroy();
      forget(conn);
    }
    await done;
  };

  return {
    port,
    url(pgUrl) {
      const u = new URL(pgUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.href;
    },
    pass() {
      mode = 'forward';
      delayMs = 0;
      resume();
    },
    delay(ms) {
      mode = 'forward';
      delayMs = ms;
      resume();
    },
    blackhole() {
      mode = 'blackhole';
    },
    refuse() {
      mode = 'refuse';
      resume(); // refusing new connections heals a partition of the open ones
    },
    dropAll() {
      for (const conn of conns) {
        if (!conn.client.destroyed) conn.client.resetAndDestroy();
        if (conn.upstream && !conn.upstream.destroyed) conn.upstream.resetAndDestroy();
      }
    },
    stats: () => ({ open: conns.size, ...counts, held: [...conns].reduce((n, c) => n + c.up.queuedBytes + c.down.queuedBytes, 0) }),
    close,
    [Symbol.asyncDispose]: close,
  };
}
