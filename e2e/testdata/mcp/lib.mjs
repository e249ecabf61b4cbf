// Shared by the scripts of e2e/mcp_server_test.go: the TypeScript MCP SDK
// from the node_modules that scripts/setup.sh fills (its absolute path in
// TROUPE_MCP_NODE_MODULES: ES modules do not read NODE_PATH), and the way
// each script reports: one JSON document on stdout.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const modules = process.env.TROUPE_MCP_NODE_MODULES;
if (!modules) {
  throw new Error('TROUPE_MCP_NODE_MODULES is not set');
}
const sdk = (path) => import(pathToFileURL(join(modules, '@modelcontextprotocol/sdk/dist/esm', path)).href);

export const { Client } = await sdk('client/index.js');
export const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
export const { StdioClientTransport } = await sdk('client/stdio.js');

export const RUN_ID = 'troupe/run_id';

// connect returns a client connected over streamable HTTP to url, with a
// bearer token when given, and the Client's options (its capabilities,
// say) when given.
export async function connect(url, token, options) {
  const client = new Client({ name: 'troupe-e2e', version: '0.0.0' }, options);
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
  return client;
}

// progressLog returns an onprogress callback that records each
// notification, and the list it records into.
export function progressLog() {
  const log = [];
  return [(p) => log.push({ progress: p.progress, total: p.total, message: p.message, meta: p._meta ?? null }), log];
}

// runIdOf reads the run id from a progress notification.
export function runIdOf(p) {
  return p?._meta?.[RUN_ID] ?? /^run (\S+) started$/.exec(p?.message ?? '')?.[1];
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// main runs fn and prints what it returns as JSON; an exception fails the
// script with its stack on stderr.
export async function main(fn) {
  try {
    const out = await fn(process.argv.slice(2));
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
  } catch (e) {
    process.stderr.write(`${e?.stack ?? e}\n`);
    process.exit(1);
  }
}
