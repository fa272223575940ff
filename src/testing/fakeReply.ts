/**
 * The shape of a scripted answer of the fake OpenAI-compatible server (fakeOpenAIServer.ts), shared
 * with the code that renders it on the wire (fakeCompletion.ts).
 * @module
 */

/** One tool call in a scripted reply. */
export interface FakeToolCall {
  /** Defaults to a unique `call_fake_<n>`. */
  id?: string;
  name: string;
  /** object → JSON.stringify; string sent as-is (may be malformed JSON) */
  arguments: string | Record<string, unknown>;
}

/** Token counts reported in a scripted reply; missing fields take the defaults (10 / 5 / 0). */
export interface FakeUsage {
  promptTokens?: number;
  completionTokens?: number;
  cachedTokens?: number;
}

/**
 * One scripted answer to one Chat Completions request:
 * - `message`: a 200 completion (JSON, or an SSE stream when the request sets `stream: true`);
 * - `status`: any status with a JSON error body (a string body is sent verbatim);
 * - `raw`: an arbitrary body, `application/json` unless a `content-type` header says otherwise (a
 *   completion with no choices, broken JSON, a hand-written SSE stream, bytes that are not UTF-8),
 *   optionally written in pieces cut at `splitAt` byte offsets, and `repeat` times over;
 * - `drop`: destroy the socket without a response;
 * - `hang`: never answer (the socket goes when the client aborts or the server closes).
 */
export type FakeReply =
  | {
      message: { content?: string | null; toolCalls?: FakeToolCall[]; refusal?: string | null };
      /** Default `{ promptTokens: 10, completionTokens: 5, cachedTokens: 0 }`; `null` omits usage. */
      usage?: FakeUsage | null;
      /** Default `tool_calls` when there are tool calls, else `stop`. */
      finishReason?: 'stop' | 'tool_calls' | 'length' | 'content_filter';
      /** Real-time delay before answering. */
      delayMs?: number;
      /** Streaming only: destroy the socket after writing this many SSE events (a stream cut mid-way). */
      cutAfterChunks?: number;
      /** Streaming only: write this many SSE events, then nothing more, keeping the socket open (a stream gone silent). */
      stallAfterChunks?: number;
      /** Streaming only: real-time pause before each SSE event after the first (a slow but live stream). */
      eventGapMs?: number;
    }
  | { status: number; body?: unknown; headers?: Record<string, string>; delayMs?: number }
  | {
      raw: string | Uint8Array;
      status?: number;
      headers?: Record<string, string>;
      delayMs?: number;
      /**
       * Byte offsets at which the body is cut into separate writes, each flushed before the next,
       * so the client's decoders meet a boundary there (TCP may still merge two pieces).
       */
      splitAt?: readonly number[];
      /**
       * Send the body this many times in a row (default 1), each copy written once the one before
       * reached the socket, and stop as soon as the client goes away: a body of any size without
       * building it (a stream of many events, a flood the client must cut off).
       */
      repeat?: number;
    }
  | { drop: true; delayMs?: number }
  | { hang: true };
