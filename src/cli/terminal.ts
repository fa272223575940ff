/**
 * Text from models, tools and database rows reaches the terminal through here. A model that writes
 * `\x1b]0;…\x07` would retitle the window, SGR sequences would recolour or hide what follows, a
 * carriage return would overwrite a line, and bidi overrides would make text read differently
 * from what it is. `forTerminal` shows every such character as a visible escape instead; every
 * printer of the CLI (live view, status, tree, serve, send/stop answers, errors) uses it for text
 * it did not write itself. `jsonLine` does the same for `--json`: JSON.stringify escapes C0 but
 * leaves DEL, C1 and the bidi controls raw.
 * @module
 */

/**
 * C0 controls (tab and newline are decided separately), DEL, C1 controls (U+0080–U+009F: 8-bit CSI
 * and OSC on terminals that honour them), the bidi marks, embeddings, overrides and isolates, and
 * the Unicode line and paragraph separators.
 */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_SINGLE_LINE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const visible = (c: string): string => {
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/**
 * `text` with every control character shown as `\xNN` / `\uNNNN`. With `multiline`, newlines
 * (and tabs) are kept — for bodies such as a report; otherwise a newline is escaped too, so a name
 * or an id stays on its line.
 */
export function forTerminal(text: string, multiline = false): string {
  return String(text).replace(multiline ? UNSAFE : UNSAFE_SINGLE_LINE, visible);
}

/** Characters JSON.stringify leaves raw that a terminal may act on. */
const JSON_UNSAFE = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `JSON.stringify(value)` with DEL, C1 and bidi controls as `\uNNNN`: the same JSON value, safe to print. */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(JSON_UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
