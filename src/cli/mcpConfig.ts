/**
 * The config file's `mcpServers` section, in the shape other MCP clients use:
 *
 *   "mcpServers": {
 *     "fs":  { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": { … } },
 *     "web": { "url": "https://mcp.example.com/mcp", "headers": { "authorization": "Bearer …" } }
 *   }
 *
 * Each entry may also carry troupe's `tools` overrides, `connectTimeoutMs`, `maxResultChars`,
 * `maxTools` and `maxListPages`.
 * The section is never saved with a run (env and headers may hold secrets): `troupe resume` reads
 * it from the config file again.
 * @module
 */
import { ConfigError } from '../errors.js';
import { mcpServer, type McpServer, type McpServerOptions } from '../mcp/config.js';

export type McpServersSection = Record<string, Omit<McpServerOptions, 'name'>>;

/** The servers of an `mcpServers` section, checked (ConfigError naming the file and the server). */
export function mcpServersOf(section: unknown, file = 'the config file'): McpServer[] {
  if (section === undefined) return [];
  if (typeof section !== 'object' || section === null || Array.isArray(section)) {
    throw new ConfigError(`${file}: mcpServers must be an object of servers by name, got ${JSON.stringify(section)}`);
  }
  return Object.entries(section).map(([name, entry]) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new ConfigError(`${file}: mcpServers.${name} must be an object`);
    try {
      return mcpServer({ ...(entry as object), name } as McpServerOptions);
    } catch (err) {
      throw new ConfigError(`${file}: mcpServers.${name}: ${(err as Error).message}`, { cause: err });
    }
  });
}

/** Header values are secrets: the redactor scrubs them from the output, the log and the database. */
export function mcpSecrets(servers: readonly McpServer[]): string[] {
  return servers.flatMap((s) => ('headers' in s.options ? Object.values(s.options.headers ?? {}) : []));
}
