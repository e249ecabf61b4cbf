// cancel.mjs URL TOOL INPUT: calls TOOL and aborts the call (AbortSignal,
// so the SDK sends notifications/cancelled) as soon as a progress message
// says the agent started.
import { connect, runIdOf, sleep, main } from './lib.mjs';

main(async ([url, tool, input]) => {
  const client = await connect(url);
  const abort = new AbortController();
  let runId;
  const progress = [];
  const onprogress = (p) => {
    progress.push(p.message);
    runId ??= runIdOf(p);
    if (/ started$/.test(p.message) && !/^run /.test(p.message)) {
      abort.abort('the user changed their mind');
    }
  };
  let error = null;
  try {
    await client.callTool({ name: tool, arguments: { input } }, undefined, { onprogress, signal: abort.signal, timeout: 120000 });
  } catch (e) {
    error = String(e);
  }
  // The cancellation is a notification the SDK sends without waiting:
  // give it time to leave before the transport closes.
  await sleep(500);
  await client.close();
  return { run_id: runId ?? null, error, progress };
});
