import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { settleWithin, Sidecar, SHIM_DIR } from "../src/sidecar.ts";
import { RpcTimeout } from "../src/rpc.ts";
import type { InitializeParams } from "../src/protocol.ts";

// the tests await every call, as Pi does: without `hold` nothing would keep the test process alive
const HOLD = { hold: true };

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

test("a healthy sidecar answers calls and stops cleanly", async () => {
	const statuses: string[] = [];
	const sc = new Sidecar(init, { onStatus: (f) => statuses.push(f.text), onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(GOOD) });
	sc.ensureStarted();
	assert.deepEqual(await sc.call("ping", {}, 3000, HOLD), { echo: "ping" });
	assert.equal(sc.state, "ready");
	assert.ok(statuses.includes("memory: ready"));
	await sc.stop();
	assert.equal(sc.state, "stopped");
});

test("a missing command fails fast with a status, not an exception into the host", async () => {
	const statuses: string[] = [];
	const sc = new Sidecar(init, { onStatus: (f) => statuses.push(f.text), onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: "/definitely/not/here serve" });
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 1000, HOLD));
	assert.ok(Date.now() - started < 1100);
	await new Promise((r) => setTimeout(r, 100));
	assert.equal(sc.state, "failed");
	assert.match(statuses.at(-1) ?? "", /unavailable/);
	await sc.stop();
});

test("a hanging sidecar costs at most the call deadline", async () => {
	const sc = new Sidecar(init, { onStatus: () => {}, onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script("setInterval(() => {}, 1000);") });
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 300, HOLD));
	const took = Date.now() - started;
	assert.ok(took >= 250 && took < 1_500, `took ${took} ms`);
	sc.stop();
});

test("after a crash the sidecar is restarted after a backoff", async () => {
	const dir = mkdtempSync(join(tmpdir(), "shim-crash-"));
	const flag = join(dir, "crashed");
	const body = `import { existsSync, writeFileSync } from "node:fs";
if (!existsSync(${JSON.stringify(flag)})) { writeFileSync(${JSON.stringify(flag)}, "1"); process.exit(3); }
${GOOD}`;
	const sc = new Sidecar(init, { onStatus: () => {}, onNotification: () => {} }, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(body) });
	await assert.rejects(sc.call("ping", {}, 2000, HOLD));
	assert.equal(sc.state, "failed");
	assert.match(sc.lastError ?? "", /code 3/);
	await assert.rejects(sc.call("ping", {}, 500, HOLD)); // still inside the backoff: fails fast
	await new Promise((r) => setTimeout(r, 1100));
	assert.deepEqual(await sc.call("ping", {}, 3000, HOLD), { echo: "ping" });
	await sc.stop();
});

const HANG = "setInterval(() => {}, 1000);";
// answers initialize, then nothing (a hung engine)
const HANG_AFTER_INIT = GOOD.replace("const result =", "if (m.method !== 'initialize') continue;\n    const result =");
// a ready sidecar that takes 1.5 s to exit after stdin EOF (a slow interpreter teardown)
const SLOW_EXIT = GOOD.replace('process.stdin.on("end", () => process.exit(0));', 'process.stdin.on("end", () => setTimeout(() => process.exit(0), 1500));');

const quiet = { onStatus: () => {}, onNotification: () => {} };

/** Running (a zombie has exited: an orphan waits for PID 1 to reap it, which may take a while). */
function alive(pid: number | undefined): boolean {
	if (pid === undefined) return false;
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "");
	} catch {
		return false;
	}
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		if (cond()) return true;
		await new Promise((r) => setTimeout(r, 20));
	}
	return cond();
}

test("a handshake past its deadline kills the child and fails a waiting call then, not at the call's own deadline", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG) }, { handshakeMs: () => 300 });
	sc.ensureStarted();
	const pid = sc.pid;
	assert.ok(alive(pid));
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 5_000, HOLD));
	const took = Date.now() - started;
	assert.ok(took >= 250 && took < 1_500, `took ${took} ms`);
	assert.equal(sc.state, "failed");
	assert.match(sc.lastError ?? "", /initialize: no answer within 300 ms/);
	assert.ok(await until(() => !alive(pid), 1_000), "the hung child must be killed");
	const again = Date.now();
	await assert.rejects(sc.call("recall", {}, 5_000, HOLD)); // inside the backoff: fails at once
	// "at once", not at the call's own 5 s deadline: a bound a loaded machine cannot reach by chance
	assert.ok(Date.now() - again < 2_500, `the second call took ${Date.now() - again} ms`);
	sc.stop();
});

test("stop() returns at once and kills a child that never answered", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG) });
	sc.ensureStarted();
	const pid = sc.pid;
	const pending = sc.call("recall", {}, 5_000, HOLD);
	const started = Date.now();
	sc.stop();
	assert.ok(Date.now() - started < 20, "stop must not wait");
	await assert.rejects(pending);
	assert.ok(await until(() => !alive(pid), 1_000), "a child that never answered is killed");
	assert.equal(sc.state, "stopped");
});

test("stop() does not wait for a ready child to exit; it exits on stdin EOF by itself", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(SLOW_EXIT) });
	assert.deepEqual(await sc.call("ping", {}, 3000, HOLD), { echo: "ping" });
	assert.ok(sc.answering);
	const pid = sc.pid;
	const started = Date.now();
	sc.stop();
	assert.ok(Date.now() - started < 20, "stop must not wait");
	assert.ok(alive(pid), "an answering child is not killed: it finishes its work and exits");
	assert.ok(await until(() => !alive(pid), 3_000), "it exits after EOF");
});

test("a ready sidecar that lets a call time out is no longer answering, and stop kills it", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG_AFTER_INIT) });
	sc.ensureStarted();
	assert.ok(await until(() => sc.state === "ready", 5_000));
	await assert.rejects(sc.call("recall", {}, 200, HOLD), RpcTimeout);
	assert.equal(sc.state, "ready");
	assert.equal(sc.answering, false);
	const pid = sc.pid;
	sc.stop();
	assert.ok(await until(() => !alive(pid), 1_000), "a child that stopped answering is killed");
});

test("settleWithin waits for the promises, at most the given time", async () => {
	let started = Date.now();
	await settleWithin([new Promise((r) => setTimeout(r, 50)), Promise.reject(new Error("x"))], 1_000);
	assert.ok(Date.now() - started < 500);
	started = Date.now();
	await settleWithin([new Promise(() => {})], 200);
	const took = Date.now() - started;
	assert.ok(took >= 190 && took < 600, `took ${took} ms`);
});

/** Run a host script (as Pi hosts the shim); how long it lived (ms) and the sidecar pid it printed. */
async function host(body: string): Promise<{ ms: number; pid: number | undefined }> {
	const dir = mkdtempSync(join(tmpdir(), "shim-host-"));
	const file = join(dir, "host.ts");
	writeFileSync(file, `import { Sidecar } from ${JSON.stringify(join(SHIM_DIR, "src", "sidecar.ts"))};\n${body}`);
	const started = Date.now();
	const child = spawn(process.execPath, [file], { stdio: ["ignore", "pipe", "inherit"] });
	let out = "";
	child.stdout.on("data", (c: Buffer) => (out += c.toString()));
	const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
	assert.equal(code, 0);
	return { ms: Date.now() - started, pid: out.trim() ? Number(out.trim()) : undefined };
}

test("the host never waits for the sidecar to exit; a held call keeps it up to the call's deadline only", async () => {
	const cmd = (body: string): string => JSON.stringify({ ...process.env, PI_MEMORY_BRIDGE_CMD: script(body) });
	const prelude = `const init = () => (${JSON.stringify(init())});
const quiet = { onStatus() {}, onNotification() {} };
`;
	const start = (body: string, handshakeMs: number): string =>
		`${prelude}const sc = new Sidecar(init, quiet, ${cmd(body)}, { handshakeMs: () => ${handshakeMs} });
process.once("exit", () => sc.killNow()); // as the bridge does
sc.ensureStarted();
process.stdout.write(String(sc.pid));
`;
	const alone = (await host("")).ms;
	// a ready child that ignores stdin EOF and would live on: the host exits as soon as its work is done
	const immortal = GOOD.replace('process.stdin.on("end", () => process.exit(0));', "setInterval(() => {}, 1000);");
	const ready = await host(`${start(immortal, 3000)}await sc.call("ping", {}, 3000, { hold: true });`);
	assert.ok(ready.ms - alone < 1_000, `host lived ${ready.ms} ms (alone ${alone} ms)`);
	assert.ok(await until(() => !alive(ready.pid), 1_000), `the exit hook ends the ready child ${ready.pid}`);
	// a call the host awaits on a sidecar that hangs after initialize: up to its deadline, no longer
	const held = await host(`${start(HANG_AFTER_INIT, 3000)}await sc.call("recall", {}, 800, { hold: true }).catch(() => undefined);`);
	// at least the call's deadline in all (a slow "alone" run must not eat into it), and not much more
	assert.ok(held.ms >= 750 && held.ms - alone < 2_000, `host lived ${held.ms} ms (alone ${alone} ms)`);
	assert.ok(await until(() => !alive(held.pid), 1_000), `the exit hook ends the hung child ${held.pid}`);
});

test("prestart spawns without a handshake; the handshake and its deadline start with the first call", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG) }, { handshakeMs: () => 300 });
	sc.prestart();
	const pid = sc.pid;
	assert.ok(alive(pid));
	assert.equal(sc.state, "idle");
	sc.prestart(); // idempotent: still the same child
	assert.equal(sc.pid, pid);
	await new Promise((r) => setTimeout(r, 500));
	assert.ok(alive(pid), "no handshake was sent, so no deadline ran out");
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 5_000, HOLD));
	const took = Date.now() - started;
	assert.ok(took >= 250 && took < 1_500, `took ${took} ms`);
	assert.ok(await until(() => !alive(pid), 1_000));
});

test("a prestarted sidecar serves calls, and one never used is killed at stop", async () => {
	const good = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(GOOD) });
	good.prestart();
	assert.deepEqual(await good.call("ping", {}, 3000, HOLD), { echo: "ping" });
	good.stop();
	const unused = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(GOOD) });
	unused.prestart();
	const pid = unused.pid;
	unused.stop();
	assert.ok(await until(() => !alive(pid), 1_000));
});

test("a call Pi awaits that runs out of time before the handshake gives the sidecar up at once", async () => {
	const sc = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG) }, { handshakeMs: () => 10_000 });
	sc.ensureStarted();
	const pid = sc.pid;
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 300, HOLD));
	assert.ok(Date.now() - started < 1_500);
	assert.equal(sc.state, "failed");
	assert.ok(await until(() => !alive(pid), 1_000), "the child that never answered is killed");
	// a fire-and-forget call (no hold) that runs out of time leaves a slow starter alone
	const slow = new Sidecar(init, quiet, { ...process.env, PI_MEMORY_BRIDGE_CMD: script(HANG) }, { handshakeMs: () => 10_000 });
	slow.ensureStarted();
	const keepAlive = setTimeout(() => {}, 1_000); // nothing of a fire-and-forget call holds the loop
	await assert.rejects(slow.call("session/start", {}, 200));
	clearTimeout(keepAlive);
	assert.equal(slow.state, "starting");
	slow.stop();
});
