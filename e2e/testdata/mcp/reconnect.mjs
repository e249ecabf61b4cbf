// reconnect.mjs URL TOOL INPUT: calls TOOL, reads the run id from the
// first progress notification and drops the connection mid-run, once a
// later notification said the run recorded an event; then a new client
// (a new session) reads the run with troupe_run_status and waits for it
// with troupe_run_result.
import { connect, runIdOf, sleep, main } from './lib.mjs';

main(async ([url, tool, input]) => {
  const first = await connect(url);
  let gotRunId, gotEvent;
  const runId = new Promise((resolve) => (gotRunId = resolve));
  const running = new Promise((resolve) => (gotEvent = resolve));
  // The first notification names the run as the server starts it; the
  // next ones are its events. Until the run's first workflow task ends
  // (a while, on a loaded machine) it has none.
  let named = false;
  const onprogress = (p) => {
    if (!named) {
      named = true;
      gotRunId(runIdOf(p));
    } else {
      gotEvent();
    }
  };
  const call = first
    .callTool({ name: tool, arguments: { input } }, undefined, { onprogress, timeout: 120000 })
    .then(() => 'answered', (e) => String(e));
  const id = await runId;
  await running;
  const firstSession = first.transport.sessionId;
  await first.close(); // no DELETE: the session is just gone from here
  const firstCall = await Promise.race([call, sleep(2000).then(() => 'pending')]);

  const second = await connect(url);
  // The event the notification carried came from the worker's live bus;
  // the status reads what the run's history holds, which has it once the
  // workflow task that recorded it ends (a while, on a loaded machine).
  let status;
  for (let i = 0; i < 300; i++) {
    status = await second.callTool({ name: 'troupe_run_status', arguments: { run_id: id } });
    if (status.isError || (status.structuredContent?.events ?? []).length > 0) break;
    await sleep(100);
  }
  const result = await second.callTool({ name: 'troupe_run_result', arguments: { run_id: id, wait_seconds: 30 } }, undefined, { timeout: 60000 });
  const after = await second.callTool({ name: 'troupe_run_status', arguments: { run_id: id } });
  const unknown = await second.callTool({ name: 'troupe_run_result', arguments: { run_id: 'no-such-run', wait_seconds: 0 } });
  const sessions = [firstSession, second.transport.sessionId];
  await second.close();
  return { run_id: id, first_call: firstCall, sessions, status, result, after, unknown };
});
