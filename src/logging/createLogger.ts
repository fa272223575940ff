/**
 * The root pino logger troupe's CLI uses, with secrets redacted. Libraries embedding troupe pass
 * their own logger; each agent logs through a child bound to `agentId` and `runId`.
 * @module
 */
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

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

export function createLogger(options: LoggerOptions = {}, destination?: DestinationStream): Logger {
  const config: LoggerOptions = {
    level: 'info',
    ...options,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  return destination ? pino(config, destination) : pino(config);
}
