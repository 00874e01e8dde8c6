// Drives the MCP door with the TypeScript MCP SDK 1.x and its task client (MCP 2025-11-25, the
// form VS Code's Copilot Chat speaks): `callToolStream` asks for `delegate` as a task when the
// server says it may be one, then polls tasks/get and takes tasks/result. Reads {url, key,
// scenarios: {name: {args, answer?, cancelOnStatus?}}} on stdin; writes {name: {...}, list}
// to $DRIVER_RESULT_FILE.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

const client = new Client({ name: "a2a-agent-tests", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(input.url), {
  requestInit: { headers: { Authorization: `Bearer ${input.key}` } },
}));
const tools = (await client.listTools()).tools;
const results = {
  protocol: client.transport?.protocolVersion,
  capabilities: client.getServerCapabilities(),
  delegate: tools.find((t) => t.name === "delegate")?.execution,
};

async function toolJson(name, args) {
  const said = await client.callTool({ name, arguments: args });
  if (said.isError) throw new Error(`${name}: ${said.content[0].text}`);
  return JSON.parse(said.content[0].text);
}

for (const [name, scenario] of Object.entries(input.scenarios)) {
  const seen = { messages: [], statuses: [] };
  const started = Date.now();
  try {
    if (scenario.plain) {
      const said = await client.callTool({ name: "delegate", arguments: scenario.args });
      seen.plain = said.content[0].text;
      results[name] = seen;
      continue;
    }
    let canceling = false;
    for await (const message of client.experimental.tasks.callToolStream(
      { name: "delegate", arguments: scenario.args },
    )) {
      seen.messages.push(message.type);
      if (message.type === "taskCreated") seen.taskId = message.task.taskId;
      if (message.type === "taskStatus") {
        if (seen.statuses.at(-1) !== message.task.status) seen.statuses.push(message.task.status);
        seen.statusMessage = message.task.statusMessage;
        if (!canceling && scenario.cancelOnStatus === message.task.status) {
          canceling = true;
          seen.cancelled = await client.experimental.tasks.cancelTask(seen.taskId);
        }
      }
      if (message.type === "result") seen.result = message.result;
      if (message.type === "error") seen.error = { code: message.error.code, message: message.error.message };
    }
    // The stream ends at input_required with what the task asks: a person answers it with
    // answer_task, and the client follows the task to its end with tasks/get and tasks/result.
    if (scenario.answer && seen.statuses.at(-1) === "input_required") {
      seen.asked = seen.result;
      const now = await toolJson("get_task", { task_id: seen.taskId });
      const [key] = Object.keys(now.inputRequests);
      seen.answered = await toolJson("answer_task", {
        task_id: seen.taskId, request_id: key, decision: scenario.answer,
      });
      const deadline = Date.now() + 60000;
      let task = await client.experimental.tasks.getTask(seen.taskId);
      while (!["completed", "failed", "cancelled"].includes(task.status) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        task = await client.experimental.tasks.getTask(seen.taskId);
      }
      seen.statuses.push(task.status);
      seen.result = await client.experimental.tasks.getTaskResult(seen.taskId, CallToolResultSchema);
    }
    if (scenario.cancelAgain) {
      try {
        await client.experimental.tasks.cancelTask(seen.taskId);
      } catch (error) {
        seen.cancelAgain = { code: error.code, message: error.message };
      }
    }
  } catch (error) {
    seen.thrown = String(error?.stack ?? error);
  }
  seen.seconds = (Date.now() - started) / 1000;
  results[name] = seen;
}
const listed = [];
let cursor;
do {
  const page = await client.experimental.tasks.listTasks(cursor);
  listed.push(...page.tasks.map((t) => ({ taskId: t.taskId, status: t.status })));
  cursor = page.nextCursor;
} while (cursor);
results.list = listed;
await client.close();
writeFileSync(process.env.DRIVER_RESULT_FILE, JSON.stringify(results));
