import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveCommand, Sidecar } from "../src/sidecar.ts";
import type { InitializeParams } from "../src/protocol.ts";

const init = (): InitializeParams => ({
	protocolVersion: "1.0",
	client: { name: "test", version: "0" },
	cwd: process.cwd(),
	projectTrusted: false,
	hasUi: false,
});

function script(body: string): string {
	const dir = mkdtempSync(join(tmpdir(), "shim-test-"));
	const p = join(dir, "fake.mjs");
	writeFileSync(p, body);
	return JSON.stringify([process.execPath, p]);
}

const GOOD = `
import { createInterface } from "node:readline";
let buf = "";
process.stdin.on("data", (c) => {
  buf += c;
  let i;
  while ((i = buf.indexOf("\\n")) >= 0) {
    const m = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1);
    const result = m.method === "initialize"
      ? { protocolVersion: "1.0", serverVersion: "t", config: {}, recall: { deadlineMs: 300, enabled: true }, footer: { state: "ready", text: "memory: ready" } }
      : { echo: m.method };
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result }) + "\\n");
  }
});
process.stdin.on("end", () => process.exit(0));
`;

test("resolveCommand: env JSON array, env words, default venv/PATH", () => {
	assert.deepEqual(resolveCommand({ PI_MEMORY_BRIDGE_CMD: '["/x y/py", "-m", "mod"]' }), { cmd: "/x y/py", args: ["-m", "mod"] });
	assert.deepEqual(resolveCommand({ PI_MEMORY_BRIDGE_CMD: " tool serve --v " }), { cmd: "tool", args: ["serve", "--v"] });
	assert.deepEqual(resolveCommand({}, "/nonexistent/shim").args, ["serve"]);
});

test("a healthy sidecar answers calls and stops cleanly", async () => {
	const statuses: string[] = [];
	const sc = new Sidecar(init, { onStatus: (f) => statuses.push(f.text), onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(GOOD) });
	sc.ensureStarted();
	assert.deepEqual(await sc.call("ping", {}, 3000), { echo: "ping" });
	assert.equal(sc.state, "ready");
	assert.ok(statuses.includes("memory: ready"));
	await sc.stop();
	assert.equal(sc.state, "stopped");
});

test("a missing command fails fast with a status, not an exception into the host", async () => {
	const statuses: string[] = [];
	const sc = new Sidecar(init, { onStatus: (f) => statuses.push(f.text), onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: "/definitely/not/here serve" });
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 1000));
	assert.ok(Date.now() - started < 1100);
	await new Promise((r) => setTimeout(r, 100));
	assert.equal(sc.state, "failed");
	assert.match(statuses.at(-1) ?? "", /unavailable/);
	await sc.stop();
});

test("a hanging sidecar costs at most the call deadline", async () => {
	const sc = new Sidecar(init, { onStatus: () => {}, onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script("setInterval(() => {}, 1000);") });
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 300));
	const took = Date.now() - started;
	assert.ok(took >= 250 && took < 800, `took ${took} ms`);
	await sc.stop(200);
});

test("after a crash the sidecar is restarted after a backoff", async () => {
	const dir = mkdtempSync(join(tmpdir(), "shim-crash-"));
	const flag = join(dir, "crashed");
	const body = `import { existsSync, writeFileSync } from "node:fs";
if (!existsSync(${JSON.stringify(flag)})) { writeFileSync(${JSON.stringify(flag)}, "1"); process.exit(3); }
${GOOD}`;
	const sc = new Sidecar(init, { onStatus: () => {}, onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(body) });
	await assert.rejects(sc.call("ping", {}, 2000));
	assert.equal(sc.state, "failed");
	assert.match(sc.lastError ?? "", /code 3/);
	await assert.rejects(sc.call("ping", {}, 500)); // still inside the backoff: fails fast
	await new Promise((r) => setTimeout(r, 1100));
	assert.deepEqual(await sc.call("ping", {}, 3000), { echo: "ping" });
	await sc.stop();
});
