// call.mjs URL: lists the tools, then calls dealdesk_coordinator with a
// progress token. callTool validates the structured content against the
// tool's outputSchema (ajv), since listTools came first.
import { connect, progressLog, main } from './lib.mjs';

main(async ([url]) => {
  const client = await connect(url);
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
