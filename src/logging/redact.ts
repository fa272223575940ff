/**
 * Secrets by value. Redacting log fields by name (`REDACT_PATHS`) misses a key that arrives inside
 * text — a provider that echoes it in a 401 body, a model that repeats it, a tool result. A
 * `Redactor` knows the secret values themselves and replaces them wherever text is stored
 * (`openStore({ redactor })`), logged (`createLogger({ redactor })`), printed (the CLI's output) or
 * sent to a model (every text that enters an agent's conversation: the coordinator uses its store's
 * redactor). With no secrets given, a redactor knows the known keys (`KNOWN_SECRET_ENV`).
 * @module
 */

/** What a secret becomes (the same censor as the log's field redaction). */
export const REDACTED = '[redacted]';

/**
 * Values shorter than this are not treated as secrets: replacing a 3-character "key" everywhere
 * would mangle ordinary text, and a key that short protects nothing anyway.
 */
export const MIN_SECRET_LENGTH = 8;

export interface Redactor {
  /** Scrub `secret` from now on (ignored when shorter than MIN_SECRET_LENGTH or absent). */
  add(secret: string | null | undefined): void;
  /** `text` with every secret replaced by `[redacted]`. */
  scrub(text: string): string;
  /** JSON text of `value` with every secret replaced inside its strings (keys included). */
  scrubJson(value: unknown): string;
}

/**
 * Environment variables whose values are secrets troupe itself may use: the OpenAI API key, which
 * `openaiModel` reads when given no `apiKey`. A redactor made without secrets knows their values.
 */
const KNOWN_SECRET_ENV: readonly string[] = ['OPENAI_API_KEY'];

/** The values of the known keys (`KNOWN_SECRET_ENV`) set in `env`. */
function knownSecrets(env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  return KNOWN_SECRET_ENV.map((name) => env[name]).filter((value): value is string => typeof value === 'string');
}

/** Deep copy of JSON-able `value` with `scrub` applied to every string. */
function scrubDeep(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    const source = typeof (value as { toJSON?: unknown }).toJSON === 'function' ? (value as { toJSON(): unknown }).toJSON() : value;
    if (typeof source !== 'object' || source === null) return scrubDeep(source, scrub);
    for (const [k, v] of Object.entries(source)) out[scrub(k)] = scrubDeep(v, scrub);
    return out;
  }
  return value;
}

/** The secrets of each redactor `createRedactor` made (the same array, growing as `add` is called). */
const made = new WeakMap<Redactor, readonly string[]>();

/**
 * A redactor for `secrets` (more can be added later, e.g. once a config file is read). Without
 * `secrets`, the known keys of the environment (`knownSecrets()`: `OPENAI_API_KEY`): what a store
 * given no redactor scrubs. Pass `[]` for a redactor that knows nothing.
 * @example
 * const redactor = createRedactor([process.env.OPENAI_API_KEY, myOtherKey]);
 * const store = openStore({ path: '.troupe/troupe.db', redactor });
 */
export function createRedactor(secrets: Iterable<string | null | undefined> = knownSecrets()): Redactor {
  /** Each secret as it appears in text, and as it appears inside a JSON string. */
  const forms: string[] = [];
  /** The secrets themselves, in the order added (`secretsOf`). */
  const known: string[] = [];
  const scrub = (text: string): string => {
    if (forms.length === 0 || typeof text !== 'string') return text;
    let out = text;
    for (const form of forms) if (out.includes(form)) out = out.split(form).join(REDACTED);
    return out;
  };
  const found = (text: string) => forms.some((form) => text.includes(form));
  const redactor: Redactor = {
    add(secret) {
      if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH) return;
      if (!known.includes(secret)) known.push(secret);
      for (const form of [secret, JSON.stringify(secret).slice(1, -1)]) if (!forms.includes(form)) forms.push(form);
      // Longest first, so a secret that contains another is replaced whole.
      forms.sort((a, b) => b.length - a.length);
    },
    scrub,
    scrubJson(value) {
      const json = JSON.stringify(value);
      if (json === undefined || forms.length === 0 || !found(json)) return json;
      // Rare: rebuild from the value, so a replacement can never cut through JSON syntax.
      return JSON.stringify(scrubDeep(value, scrub));
    },
  };
  for (const secret of secrets) redactor.add(secret);
  made.set(redactor, known);
  return redactor;
}

/**
 * The secrets a redactor made by `createRedactor` knows so far, oldest first (the live list: it
 * grows with `add`); undefined for any other redactor. A store's commit thread rebuilds the
 * redactor from them (store/sqliteWriter.ts).
 */
export const secretsOf = (redactor: Redactor): readonly string[] | undefined => made.get(redactor);
