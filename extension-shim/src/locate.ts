/**
 * Where the sidecar is: `PI_MEMORY_BRIDGE_CMD`, this checkout's `.venv`, `PATH`, then where
 * `uv tool install` and `pipx install` put it (Pi started from a desktop launcher or a service
 * often has a PATH without `~/.local/bin`). When none has it, the reason names the install command.
 */
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";

export const SIDECAR_NAME = "pi-memory-bridge";
export const INSTALL_COMMAND = "uv tool install pi-memory-bridge";
export const NOT_INSTALLED = `not installed or not on PATH: run \`${INSTALL_COMMAND}\` (or pipx), or set PI_MEMORY_BRIDGE_CMD for a venv`;

export type Located = { ok: true; cmd: string; args: string[]; from: string } | { ok: false; reason: string };

function executable(path: string): boolean {
	try {
		accessSync(path, constants.X_OK);
		return true;
	} catch {
		return false;
	}
}

/** `PI_MEMORY_BRIDGE_CMD` as a JSON array of strings, or words split on spaces. */
function fromEnv(raw: string): { cmd: string; args: string[] } {
	let parts: string[] | undefined;
	if (raw.startsWith("[")) {
		try {
			const parsed: unknown = JSON.parse(raw);
			if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((p) => typeof p === "string")) parts = parsed;
		} catch {
			parts = undefined;
		}
	}
	parts ??= raw.split(/\s+/);
	return { cmd: parts[0]!, args: parts.slice(1) };
}

/** The standard tool-install places, in the order uv and pipx document them. */
export function toolInstallCandidates(env: NodeJS.ProcessEnv): string[] {
	const home = env.HOME || homedir();
	const dataHome = env.XDG_DATA_HOME || join(home, ".local", "share");
	const bins = [
		env.UV_TOOL_BIN_DIR,
		env.XDG_BIN_HOME,
		env.PIPX_BIN_DIR,
		join(home, ".local", "bin"),
	].filter((d): d is string => Boolean(d));
	const venvs = [
		join(env.UV_TOOL_DIR || join(dataHome, "uv", "tools"), SIDECAR_NAME, "bin"),
		join(env.PIPX_HOME || join(dataHome, "pipx"), "venvs", SIDECAR_NAME, "bin"),
		join(home, ".local", "pipx", "venvs", SIDECAR_NAME, "bin"), // pipx before 1.3
	];
	return [...new Set([...bins, ...venvs].map((d) => join(d, SIDECAR_NAME)))];
}

export function locateSidecar(env: NodeJS.ProcessEnv, shimDir: string): Located {
	const raw = env.PI_MEMORY_BRIDGE_CMD?.trim();
	if (raw) return { ok: true, ...fromEnv(raw), from: "PI_MEMORY_BRIDGE_CMD" };
	const serve = ["serve"];
	const venv = join(shimDir, "..", ".venv", "bin", SIDECAR_NAME);
	if (executable(venv)) return { ok: true, cmd: venv, args: serve, from: "checkout .venv" };
	for (const dir of (env.PATH ?? "").split(delimiter)) {
		if (!dir) continue;
		const candidate = join(dir, SIDECAR_NAME);
		if (executable(candidate)) return { ok: true, cmd: candidate, args: serve, from: "PATH" };
	}
	for (const candidate of toolInstallCandidates(env)) {
		if (executable(candidate)) return { ok: true, cmd: candidate, args: serve, from: "tool install" };
	}
	return { ok: false, reason: NOT_INSTALLED };
}
