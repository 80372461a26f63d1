import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { daemonEnabled, socketPath, openDaemon } from "../src/daemon.ts";
import { Sidecar, SHIM_DIR } from "../src/sidecar.ts";
import type { InitializeParams } from "../src/protocol.ts";

// the real sidecar, as the shim finds it in this checkout
const SIDECAR = join(SHIM_DIR, "..", ".venv", "bin", "pi-memory-bridge");
const HOLD = { hold: true };
const init = (): InitializeParams => ({
	protocolVersion: "1.0",
	client: { name: "pi-memory-bridge-shim", version: "0.1.0" },
	cwd: process.cwd(),
	projectTrusted: false,
	hasUi: false,
});
const quiet = { onStatus: () => {}, onNotification: () => {} };
// a cold start on a loaded 2-core machine may take seconds: speed is the bench's business, not these tests'
const SLOW_START_OK = { handshakeMs: () => 20_000 };

function sandbox(extra: Record<string, string> = {}): { env: NodeJS.ProcessEnv; root: string } {
	const root = mkdtempSync("/tmp/pmb-shim-"); // short: a socket path holds ~100 bytes
	chmodSync(root, 0o700);
	const env: NodeJS.ProcessEnv = {
		...process.env,
		PI_MEMORY_BRIDGE_DAEMON: "1",
		PI_MEMORY_BRIDGE_CMD: JSON.stringify([SIDECAR, "serve"]),
		PI_MEMORY_BRIDGE_DAEMON_IDLE_S: "1",
		PI_MEMORY_BRIDGE_EMBEDDINGS: "off",
		PI_CODING_AGENT_DIR: join(root, "agent"),
		HOME: root,
		XDG_RUNTIME_DIR: root,
		...extra,
	};
	return { env, root };
}

function daemonPid(env: NodeJS.ProcessEnv): number {
	const path = socketPath(SIDECAR, ["serve"], env)!;
	return Number.parseInt(readFileSync(`${path}.lock`, "utf8"), 10);
}

function alive(pid: number): boolean {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "");
	} catch {
		return false;
	}
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		if (check()) return true;
		await new Promise((r) => setTimeout(r, 25));
	}
	return check();
}

test("on by default for the program the shim finds itself; a PI_MEMORY_BRIDGE_CMD keeps its own child unless asked", () => {
	assert.equal(daemonEnabled({}), true);
	assert.equal(daemonEnabled({ PI_MEMORY_BRIDGE_DAEMON: "off" }), false);
	assert.equal(daemonEnabled({ PI_MEMORY_BRIDGE_DAEMON: "0" }), false);
	assert.equal(daemonEnabled({ PI_MEMORY_BRIDGE_CMD: "/bin/sleep 600" }), false);
	assert.equal(daemonEnabled({ PI_MEMORY_BRIDGE_CMD: "/bin/sleep 600", PI_MEMORY_BRIDGE_DAEMON: "yes" }), true);
});

test("the socket's name follows what decides the sidecar's behaviour, in a private folder", () => {
	const { env, root } = sandbox();
	const a = socketPath(SIDECAR, ["serve"], env)!;
	assert.equal(socketPath(SIDECAR, ["serve"], { ...env, PI_MEMORY_BRIDGE_TIMINGS: "/x" }), a); // shim-only
	assert.equal(socketPath(SIDECAR, ["serve"], { ...env, UNRELATED_VAR: "1" }), a);
	for (const change of [{ PI_MEMORY_BRIDGE_BACKEND: "memorycore" }, { PI_CODING_AGENT_DIR: "/elsewhere" }, { TDAI_MEMORY_USER_KEY: "k" }]) {
		assert.notEqual(socketPath(SIDECAR, ["serve"], { ...env, ...change }), a, JSON.stringify(change));
	}
	assert.notEqual(socketPath(SIDECAR, ["serve", "--x"], env), a);
	assert.ok(a.startsWith(join(root, `pi-memory-bridge-${process.getuid!()}`)));
	rmSync(root, { recursive: true, force: true });
});

test("no socket where the folder is open to others, or the switch is off: today's stdio child", () => {
	const { env, root } = sandbox();
	const dir = join(root, `pi-memory-bridge-${process.getuid!()}`);
	mkdirSync(dir, { mode: 0o700 });
	chmodSync(dir, 0o755);
	assert.equal(socketPath(SIDECAR, ["serve"], env), undefined);
	assert.equal(openDaemon(SIDECAR, ["serve"], env), undefined);
	chmodSync(dir, 0o700);
	assert.equal(openDaemon(SIDECAR, ["serve"], { ...env, PI_MEMORY_BRIDGE_DAEMON: "0" }), undefined);
	rmSync(root, { recursive: true, force: true });
});

test("two Pis share one background sidecar; stop ends a connection, idle ends the daemon", async () => {
	const { env, root } = sandbox();
	const a = new Sidecar(init, quiet, env, SLOW_START_OK);
	a.ensureStarted();
	assert.equal(((await a.call<{ backend: string }>("status", {}, 20_000, HOLD)) as { backend: string }).backend, "local");
	const pid = daemonPid(env);
	const b = new Sidecar(init, quiet, env, SLOW_START_OK);
	b.ensureStarted();
	const started = Date.now();
	await b.call("session/start", { piSessionId: "pi-b", entries: [] }, 20_000, HOLD);
	assert.ok(Date.now() - started < 3_000); // no interpreter start: the daemon was there
	assert.equal(daemonPid(env), pid);
	a.stop();
	await new Promise((r) => setTimeout(r, 1_500)); // past the idle time: b's connection keeps it up
	assert.ok(alive(pid));
	await b.call("status", {}, 10_000, HOLD);
	b.stop();
	assert.ok(await until(() => !alive(pid), 15_000), "the idle daemon exits by itself");
	rmSync(root, { recursive: true, force: true });
});

test("a daemon killed with SIGKILL is replaced by the next Pi", async () => {
	const { env, root } = sandbox();
	const a = new Sidecar(init, quiet, env, SLOW_START_OK);
	a.ensureStarted();
	await a.call("status", {}, 20_000, HOLD);
	const first = daemonPid(env);
	process.kill(first, "SIGKILL");
	assert.ok(await until(() => !alive(first), 5_000));
	a.stop();
	const b = new Sidecar(init, quiet, env, SLOW_START_OK);
	b.ensureStarted();
	await b.call("status", {}, 20_000, HOLD);
	const second = daemonPid(env);
	assert.notEqual(second, first);
	b.stop();
	assert.ok(await until(() => !alive(second), 15_000));
	rmSync(root, { recursive: true, force: true });
});

test("a command that never listens costs the handshake deadline and is killed with its group", async () => {
	const { env, root } = sandbox({ PI_MEMORY_BRIDGE_CMD: "/bin/sleep 600" });
	const sc = new Sidecar(init, quiet, env, { handshakeMs: () => 400 });
	sc.ensureStarted();
	const pid = sc.pid!;
	const started = Date.now();
	await assert.rejects(sc.call("recall", {}, 5_000, HOLD));
	assert.ok(Date.now() - started < 1_500);
	assert.ok(await until(() => !alive(pid), 3_000), "the never-listening process was killed");
	assert.equal(sc.state, "failed");
	sc.stop();
	assert.ok(!existsSync(`${socketPath("/bin/sleep", ["600"], env)}`));
	rmSync(root, { recursive: true, force: true });
});

test("a Pi that connected but never asked anything (prestart, no session) leaves the shared daemon alone", async () => {
	const { env, root } = sandbox();
	const a = new Sidecar(init, quiet, env, SLOW_START_OK);
	a.ensureStarted();
	await a.call("status", {}, 20_000, HOLD);
	const pid = daemonPid(env);
	const b = new Sidecar(init, quiet, env, SLOW_START_OK);
	b.prestart();
	await new Promise((r) => setTimeout(r, 300)); // connected by now
	b.stop(); // never answered anything: a stdio child would be killed here
	await new Promise((r) => setTimeout(r, 300));
	assert.ok(alive(pid));
	await a.call("status", {}, 10_000, HOLD);
	a.stop();
	assert.ok(await until(() => !alive(pid), 15_000));
	rmSync(root, { recursive: true, force: true });
});
