/**
 * The root pino logger troupe's CLI uses, with secrets redacted. Libraries embedding troupe pass
 * their own logger; each agent logs through a child bound to `agentId` and `runId`.
 * @module
 */
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { REDACTED, type Redactor } from './redact.js';

/** Paths never written to a log. */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["api-key"]',
  '*.headers["api-key"]',
];

export interface TroupeLoggerOptions extends LoggerOptions {
  /** Secret values to scrub from every record (field redaction alone misses a key inside a message). */
  redactor?: Redactor;
}

export function createLogger(options: TroupeLoggerOptions = {}, destination?: DestinationStream): Logger {
  const { redactor, ...rest } = options;
  const config: LoggerOptions = {
    level: 'info',
    ...rest,
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    // The one place every record passes as text, after serialisation: scrub the values there.
    ...(redactor ? { hooks: { ...rest.hooks, streamWrite: (line: string) => redactor.scrub(line) } } : {}),
  };
  return destination ? pino(config, destination) : pino(config);
}

/** What a part logs to when its user gave no logger: nothing. One logger, made at the first need. */
let silent: Logger | undefined;
export const silentLogger = (): Logger => (silent ??= pino({ level: 'silent' }));
