// session.mjs URL TOOL OTHER_TOOL KEY: holds a conversation with TOOL (a
// session tool). A first client sends two messages, the second with the
// session id of the first answer, and closes. A second client (a new MCP
// session) sends a third message to the same session id, with the
// idempotency key KEY, and sends it again with the same key; then it
// tries what must fail: an unknown session id, an empty message, and the
// session of OTHER_TOOL (which it starts). Last it sends "slow ..." and
// aborts the call once the session has taken the message, then sends a
// message after it.
import { connect, progressLog, sleep, main } from './lib.mjs';

const SESSION_ID = 'troupe/session_id';

main(async ([url, tool, otherTool, key]) => {
  const first = await connect(url);
  const { tools } = await first.listTools(); // callTool then checks structuredContent against outputSchema
  const [onprogress, progress] = progressLog();
  const one = await first.callTool({ name: tool, arguments: { message: 'hello' } }, undefined, { onprogress, timeout: 120000 });
  const sessionId = one.structuredContent?.session_id;
  const two = await first.callTool({ name: tool, arguments: { message: 'again', session_id: sessionId } }, undefined, { timeout: 120000 });
  const firstSession = first.transport.sessionId;
  await first.close();

  const second = await connect(url);
  await second.listTools();
  const keyed = { name: tool, arguments: { message: 'third', session_id: sessionId }, _meta: { 'troupe/idempotency_key': key } };
  const three = await second.callTool(keyed, undefined, { timeout: 120000 });
  const threeAgain = await second.callTool(keyed, undefined, { timeout: 120000 });

  const unknown = await second.callTool({ name: tool, arguments: { message: 'hi', session_id: 'no-such-session' } });
  const empty = await second.callTool({ name: tool, arguments: { message: '', session_id: sessionId } });
  const other = await second.callTool({ name: otherTool, arguments: { message: 'hi' } }, undefined, { timeout: 120000 });
  const wrongTool = await second.callTool({ name: tool, arguments: { message: 'hi', session_id: other.structuredContent?.session_id } });

  // The slow message's call is aborted (the SDK sends
  // notifications/cancelled) once the session said it took the message.
  const abort = new AbortController();
  const slowProgress = [];
  let cancelled = null;
  try {
    await second.callTool({ name: tool, arguments: { message: 'slow four', session_id: sessionId } }, undefined, {
      signal: abort.signal,
      timeout: 120000,
      onprogress: (p) => {
        slowProgress.push(p.message);
        if (/: message taken$/.test(p.message)) {
          abort.abort('the user changed their mind');
        }
      },
    });
  } catch (e) {
    cancelled = String(e);
  }
  await sleep(500); // the cancellation leaves without waiting
  const after = await second.callTool({ name: tool, arguments: { message: 'after', session_id: sessionId } }, undefined, { timeout: 120000 });
  const sessions = [firstSession, second.transport.sessionId];
  await second.close();
  return {
    tools, progress, session_id: sessionId, sessions, meta_session_id: one._meta?.[SESSION_ID] ?? null,
    one, two, three, three_again: threeAgain, unknown, empty, other, wrong_tool: wrongTool,
    cancelled, slow_progress: slowProgress, after,
  };
});
