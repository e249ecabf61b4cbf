// idempotency.mjs URL TOOL INPUT KEY: two clients, each its own session,
// make the same call with the same idempotency key, one after the other.
import { connect, main } from './lib.mjs';

main(async ([url, tool, input, key]) => {
  const results = [];
  for (let i = 0; i < 2; i++) {
    const client = await connect(url);
    results.push(await client.callTool({ name: tool, arguments: { input }, _meta: { 'troupe/idempotency_key': key } }, undefined, { timeout: 120000 }));
    await client.close();
  }
  return { results };
});
