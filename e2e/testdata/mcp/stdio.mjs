// stdio.mjs: starts the server as a subprocess (the command, its
// arguments and environment as JSON in TROUPE_STDIO_SERVER) over stdio,
// lists its tools and calls dealdesk_coordinator with a progress token.
import { Client, StdioClientTransport, progressLog, main } from './lib.mjs';

main(async () => {
  const server = JSON.parse(process.env.TROUPE_STDIO_SERVER);
  const transport = new StdioClientTransport({ command: server.command, args: server.args, env: server.env, stderr: 'inherit' });
  const client = new Client({ name: 'troupe-e2e-stdio', version: '0.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const [onprogress, progress] = progressLog();
  const result = await client.callTool(
    { name: 'dealdesk_coordinator', arguments: { input: 'Review the Acme Corp deal' } },
    undefined,
    { onprogress, timeout: 120000 },
  );
  await client.close();
  return { tools, progress, result };
});
