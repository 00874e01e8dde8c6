// Drives the MCP door with @modelcontextprotocol/ext-tasks (the TypeScript implementation of
// the MCP tasks extension, 2026-07-28) over @modelcontextprotocol/client 2.x: each scenario
// calls `delegate`, lets ext-tasks poll tasks/get to the end, answers input requests through
// tasks/update and cancels through tasks/cancel. Reads {url, key, scenarios: {name: {args,
// answer?, cancelOnStatus?}}} on stdin; writes {name: {...}} to $DRIVER_RESULT_FILE.
import { writeFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  taskViewFromExecutionEvent,
  TaskCancelledError,
} from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";
const CLIENT_INFO = { name: "a2a-agent-tests", version: "1" };
const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));
const auth = { Authorization: `Bearer ${input.key}` };

const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: { pin: PROTOCOL } } });
await client.connect(new StreamableHTTPClientTransport(new URL(input.url), {
  requestInit: { headers: auth },
}));

// ext-tasks sends tools/call and tasks/* through this (the SDK client's codecs do not take a
// task for a tool's answer); the request's _meta is framed by ext-tasks already.
let nextId = 1;
async function rawDispatch(request, options = {}) {
  const { method, params = {} } = request;
  const name = method === "tools/call" ? params.name : params.taskId;
  const response = await fetch(input.url, {
    method: "POST",
    signal: options.signal,
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL,
      "Mcp-Method": method,
      ...(name === undefined ? {} : { "Mcp-Name": name }),
      ...auth,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
  });
  const message = JSON.parse(await response.text());
  return message.error ? { kind: "error", error: message.error } : { kind: "result", result: message.result };
}

const results = {};
for (const [name, scenario] of Object.entries(input.scenarios)) {
  const seen = { statuses: [], inputRequests: [] };
  const started = Date.now();
  const session = createTaskSessionFromClient(client, {
    endpointId: input.url,
    rawDispatch,
    v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo: CLIENT_INFO, clientCapabilities: {} },
    onInputRequest: async (request, ctx) => {
      seen.inputRequests.push({ kind: request.kind, key: ctx.inputId, params: request.params });
      return scenario.answer ?? { action: "cancel" };
    },
  });
  try {
    const execution = await session.callTool("delegate", scenario.args);
    seen.kind = execution.kind;
    seen.taskId = execution.handle?.taskId;
    let canceling = false;
    const { outcome } = await execution.settle({
      onEvent: (event) => {
        const view = taskViewFromExecutionEvent(event);
        if (!view) return;
        if (seen.statuses.at(-1) !== view.status) seen.statuses.push(view.status);
        if (!canceling && scenario.cancelOnStatus === view.status) {
          canceling = true;
          execution.cancel().catch((e) => (seen.cancelError = String(e)));
        }
      },
    });
    seen.outcome = outcome.status;
    if (outcome.status === "completed") seen.result = outcome.result;
    if (outcome.status === "failed") seen.error = { code: outcome.error.code, message: outcome.error.message };
  } catch (error) {
    if (error instanceof TaskCancelledError) seen.outcome = "cancelled";
    else seen.error = { message: String(error?.stack ?? error) };
  } finally {
    await session.close();
  }
  seen.seconds = (Date.now() - started) / 1000;
  results[name] = seen;
}
await client.close();
writeFileSync(process.env.DRIVER_RESULT_FILE, JSON.stringify(results));
