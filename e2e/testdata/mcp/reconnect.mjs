// reconnect.mjs URL TOOL INPUT: calls TOOL, reads the run id from the
// first progress notification and drops the connection mid-run; then a
// new client (a new session) reads the run with troupe_run_status and
// waits for it with troupe_run_result.
import { connect, runIdOf, sleep, main } from './lib.mjs';

main(async ([url, tool, input]) => {
  const first = await connect(url);
  let gotRunId;
  const runId = new Promise((resolve) => (gotRunId = resolve));
  const call = first
    .callTool({ name: tool, arguments: { input } }, undefined, { onprogress: (p) => gotRunId(runIdOf(p)), timeout: 120000 })
    .then(() => 'answered', (e) => String(e));
  const id = await runId;
  const firstSession = first.transport.sessionId;
  await first.close(); // no DELETE: the session is just gone from here
  const firstCall = await Promise.race([call, sleep(2000).then(() => 'pending')]);

  const second = await connect(url);
  const status = await second.callTool({ name: 'troupe_run_status', arguments: { run_id: id } });
  const result = await second.callTool({ name: 'troupe_run_result', arguments: { run_id: id, wait_seconds: 30 } }, undefined, { timeout: 60000 });
  const after = await second.callTool({ name: 'troupe_run_status', arguments: { run_id: id } });
  const unknown = await second.callTool({ name: 'troupe_run_result', arguments: { run_id: 'no-such-run', wait_seconds: 0 } });
  const sessions = [firstSession, second.transport.sessionId];
  await second.close();
  return { run_id: id, first_call: firstCall, sessions, status, result, after, unknown };
});
