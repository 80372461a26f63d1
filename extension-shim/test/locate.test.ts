import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { INSTALL_COMMAND, locateSidecar, toolInstallCandidates } from "../src/locate.ts";

function exe(path: string): string {
	mkdirSync(join(path, ".."), { recursive: true });
	writeFileSync(path, "#!/bin/sh\n");
	chmodSync(path, 0o755);
	return path;
}

function world(): { root: string; home: string; shim: string } {
	const root = mkdtempSync(join(tmpdir(), "locate-"));
	const home = join(root, "home");
	const shim = join(root, "checkout", "extension-shim");
	mkdirSync(home, { recursive: true });
	mkdirSync(shim, { recursive: true });
	return { root, home, shim };
}

test("PI_MEMORY_BRIDGE_CMD wins, as a JSON array or as words", () => {
	const { home, shim } = world();
	assert.deepEqual(locateSidecar({ HOME: home, PI_MEMORY_BRIDGE_CMD: '["/x y/py", "-m", "mod"]' }, shim), {
		ok: true, cmd: "/x y/py", args: ["-m", "mod"], from: "PI_MEMORY_BRIDGE_CMD",
	});
	assert.deepEqual(locateSidecar({ HOME: home, PI_MEMORY_BRIDGE_CMD: " tool serve --v " }, shim), {
		ok: true, cmd: "tool", args: ["serve", "--v"], from: "PI_MEMORY_BRIDGE_CMD",
	});
});

test("then the checkout's venv, then PATH, then the tool-install places, in that order", () => {
	const { root, home, shim } = world();
	const local = exe(join(home, ".local", "bin", "pi-memory-bridge"));
	const onPath = exe(join(root, "bin", "pi-memory-bridge"));
	const env = { HOME: home, PATH: `/nonexistent:${join(root, "bin")}` };
	assert.equal((locateSidecar(env, shim) as { cmd: string }).cmd, onPath);
	const venv = exe(join(shim, "..", ".venv", "bin", "pi-memory-bridge"));
	const first = locateSidecar(env, shim);
	assert.ok(first.ok && first.cmd === venv && first.from === "checkout .venv" && first.args[0] === "serve");
	const withoutPath = locateSidecar({ HOME: home, PATH: "/usr/bin" }, join(root, "elsewhere", "shim"));
	assert.ok(withoutPath.ok && withoutPath.cmd === local && withoutPath.from === "tool install");
});

test("uv's and pipx's own directories count, including their venvs when the bin link is missing", () => {
	const { root, home } = world();
	const uvBin = exe(join(root, "uvbin", "pi-memory-bridge"));
	assert.equal((locateSidecar({ HOME: home, UV_TOOL_BIN_DIR: join(root, "uvbin") }, "/none") as { cmd: string }).cmd, uvBin);
	const pipxVenv = exe(join(home, ".local", "share", "pipx", "venvs", "pi-memory-bridge", "bin", "pi-memory-bridge"));
	assert.equal((locateSidecar({ HOME: home }, "/none") as { cmd: string }).cmd, pipxVenv);
	const candidates = toolInstallCandidates({ HOME: home, XDG_DATA_HOME: join(root, "data") });
	assert.ok(candidates.includes(join(root, "data", "uv", "tools", "pi-memory-bridge", "bin", "pi-memory-bridge")));
	assert.equal(new Set(candidates).size, candidates.length);
});

test("a file that is not executable does not count; nothing found names the install command", () => {
	const { root, home, shim } = world();
	mkdirSync(join(root, "bin"));
	writeFileSync(join(root, "bin", "pi-memory-bridge"), "not a program");
	const found = locateSidecar({ HOME: home, PATH: join(root, "bin") }, shim);
	assert.equal(found.ok, false);
	assert.ok(!found.ok && found.reason.includes(INSTALL_COMMAND));
	assert.ok(!found.ok && found.reason.includes("PI_MEMORY_BRIDGE_CMD")); // the venv route
	assert.ok(!found.ok && `memory: unavailable (${found.reason})`.length <= 140);
});
