// An ACP client on the official TypeScript SDK (`@agentclientprotocol/sdk` on npm, the
// release current when written; acpx bundles an older major) driving `agentctl acp`:
// session/new, the mode and model config options, a prompt with its usage updates,
// session/resume, session/close, session/list and session/delete. Prints one JSON object with
// what it saw, for the Rust test (acp.rs) to check.
//
// Usage: node acp_client.mjs SDK AGENTCTL CWD, SDK the file URL of the SDK's entry point (an
// ES module resolves bare names from its own directory, not from where the SDK is installed).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [sdkPath, agentctl, cwd] = process.argv.slice(2);
const { client, methods, ndJsonStream, PROTOCOL_VERSION } = await import(sdkPath);

const agentProcess = spawn(agentctl, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));
const updates = [];
const kinds = () => [...new Set(updates.map((u) => u.sessionUpdate))].filter((k) => k !== "available_commands_update").sort();
const current = (options) => Object.fromEntries(options.map((o) => [o.id, o.currentValue]));

const app = client({ name: "ts-sdk-check" })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  })
  .onRequest(methods.client.session.requestPermission, () => {
    throw new Error("no permission is asked in this scenario");
  });

const seen = await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const created = await agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const sessionId = created.sessionId;
  const set = async (configId, value) =>
    current((await agent.request(methods.agent.session.setConfigOption, { sessionId, configId, value })).configOptions);
  const mode = await set("mode", "read-only");
  const model = await set("model", "anthropic/claude-from-ts");
  const answer = await agent.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "hi" }],
  });
  const usage = updates.filter((u) => u.sessionUpdate === "usage_update").map((u) => ({ used: u.used, size: u.size }));
  updates.length = 0;
  const resumed = await agent.request(methods.agent.session.resume, { sessionId, cwd, mcpServers: [] });
  const onResume = kinds();
  await agent.request(methods.agent.session.close, { sessionId });
  const listed = await agent.request(methods.agent.session.list, { cwd });
  await agent.request(methods.agent.session.delete, { sessionId });
  await agent.request(methods.agent.session.delete, { sessionId });
  const afterDelete = await agent.request(methods.agent.session.list, { cwd });
  return {
    capabilities: Object.keys(init.agentCapabilities.sessionCapabilities ?? {}).sort(),
    created: current(created.configOptions),
    modes: created.modes.availableModes.map((m) => m.id),
    mode,
    model,
    stop_reason: answer.stopReason,
    usage: usage.slice(-1),
    resumed: current(resumed.configOptions),
    on_resume: onResume,
    listed: listed.sessions.map((s) => s.sessionId),
    session: sessionId,
    after_delete: afterDelete.sessions.map((s) => s.sessionId),
  };
});
agentProcess.stdin.end();
console.log(JSON.stringify(seen));
