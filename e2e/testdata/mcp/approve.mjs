// approve.mjs URL MODE TOOL MESSAGE: calls TOOL (an agent whose tool
// calls wait for approval) with MESSAGE as its input, after listing the
// tools (so callTool checks structured content against output schemas).
//
//   accept, decline: the client declares the elicitation capability and
//     answers every elicitation/create with accept ({approve: true, and a
//     message}) or decline; it reports the requests it got.
//   fallback: the client declares no elicitation. The first answer lists
//     the calls that wait; the client approves the first one it is shown
//     with troupe_run_approve, rejects the next ("keep it"), and so on
//     alternately until an answer waits no more. With TOOL a session
//     tool, the message is sent as {message} and decided by session_id.
import { connect, progressLog, main } from './lib.mjs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const { ElicitRequestSchema } = await import(
  pathToFileURL(join(process.env.TROUPE_MCP_NODE_MODULES, '@modelcontextprotocol/sdk/dist/esm/types.js')).href
);

const APPROVALS = 'troupe/approvals';
const STATUS = 'troupe/status';

main(async ([url, mode, tool, message]) => {
  const elicit = mode === 'accept' || mode === 'decline';
  const elicitations = [];
  const client = await connect(url, undefined, elicit ? { capabilities: { elicitation: { form: {} } } } : {});
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      elicitations.push(req.params);
      if (mode === 'decline') {
        return { action: 'decline' };
      }
      return { action: 'accept', content: { approve: true, message: 'go ahead' } };
    });
  }
  const { tools } = await client.listTools();
  const session = tool.endsWith('_session');
  const args = session ? { message } : { input: message };
  const [onprogress, progress] = progressLog();
  const results = [await client.callTool({ name: tool, arguments: args }, undefined, { onprogress, timeout: 120000 })];
  const decisions = [];
  for (let last = results[0]; last._meta?.[STATUS] === 'waiting_for_approval' && decisions.length < 10; ) {
    const call = last._meta[APPROVALS][0].id;
    const approve = decisions.length % 2 === 0;
    const decision = { call, approve, ...(approve ? {} : { message: 'keep it' }) };
    if (session) {
      decision.session_id = last._meta['troupe/session_id'];
    } else {
      decision.run_id = last._meta['troupe/run_id'];
    }
    decisions.push(decision);
    last = await client.callTool({ name: 'troupe_run_approve', arguments: decision }, undefined, { timeout: 120000 });
    results.push(last);
  }
  await client.close();
  return { tools, elicitations, progress, results, decisions };
});
