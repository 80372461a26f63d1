/**
 * The sidecar process: spawn, handshake, deadlines, crash restart with backoff, stop.
 * Nothing here ever throws into Pi: callers get a rejected promise they turn into "no memory".
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { RpcClient, RpcClosed, RpcError, RpcTimeout } from "./rpc.ts";
import { unavailable } from "./footer.ts";
import { PROTOCOL_VERSION, type Footer, type InitializeParams, type InitializeResult } from "./protocol.ts";

export const SHIM_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const INIT_TIMEOUT_MS = 5_000;
const READY_WAIT_MS = 5_000; // no call waits longer than this for a sidecar that is still starting
const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 60_000;

export type SidecarState = "idle" | "starting" | "ready" | "failed" | "stopped";

/** `PI_MEMORY_BRIDGE_CMD` (a JSON array, or words split on spaces), else the checkout's venv, else PATH. */
export function resolveCommand(env: NodeJS.ProcessEnv, shimDir: string = SHIM_DIR): { cmd: string; args: string[] } {
	const raw = env.PI_MEMORY_BRIDGE_CMD?.trim();
	if (raw) {
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
	const venv = join(shimDir, "..", ".venv", "bin", "pi-memory-bridge");
	return { cmd: existsSync(venv) ? venv : "pi-memory-bridge", args: ["serve"] };
}

export interface SidecarEvents {
	onStatus(footer: Footer): void;
	onNotification(method: string, params: unknown): void;
}

export class Sidecar {
	state: SidecarState = "idle";
	lastError: string | undefined;
	initResult: InitializeResult | undefined;
	private child: ChildProcess | undefined;
	private rpc: RpcClient | undefined;
	private ready: Promise<InitializeResult> | undefined;
	private backoffMs = FIRST_BACKOFF_MS;
	private nextStartAt = 0;
	private stopping = false;
	private readonly events: SidecarEvents;
	private readonly initParams: () => InitializeParams;
	private readonly env: NodeJS.ProcessEnv;

	constructor(initParams: () => InitializeParams, events: SidecarEvents, env: NodeJS.ProcessEnv = process.env) {
		this.initParams = initParams;
		this.events = events;
		this.env = env;
	}

	get pid(): number | undefined {
		return this.child?.pid;
	}

	/** Start in the background if not running (and not inside a crash backoff). Never blocks. */
	ensureStarted(): void {
		if (this.stopping || this.state === "starting" || this.state === "ready") return;
		if (this.state === "failed" && Date.now() < this.nextStartAt) return;
		this.spawnChild();
	}

	/**
	 * Call a method, waiting for the handshake within the same deadline. `timeoutMs` may be a
	 * function: it is read again once the handshake is done, since the configured deadline is only
	 * known from the handshake's answer.
	 */
	async call<T>(method: string, params: unknown, timeoutMs: number | (() => number)): Promise<T> {
		this.ensureStarted();
		const ready = this.ready;
		const rpc = this.rpc;
		if (!ready || !rpc || this.state === "failed") throw new RpcClosed(this.lastError ?? "sidecar not running");
		const budget = (): number => (typeof timeoutMs === "function" ? timeoutMs() : timeoutMs);
		const started = Date.now();
		const readyWait = Math.min(budget(), READY_WAIT_MS);
		await withTimeout(ready, readyWait, `sidecar not ready within ${readyWait} ms`);
		const left = budget() - (Date.now() - started);
		if (left <= 0) throw new RpcTimeout(method, budget());
		return rpc.request<T>(method, params, left);
	}

	get inFlight(): number {
		return this.rpc?.inFlight ?? 0;
	}

	/** Ask for a clean exit, close stdin (the sidecar also exits on EOF), then make sure it is gone. */
	async stop(graceMs = 1_500): Promise<void> {
		this.stopping = true;
		const child = this.child;
		const rpc = this.rpc;
		this.child = undefined;
		this.rpc = undefined;
		this.ready = undefined;
		this.state = "stopped";
		if (!child) return;
		try {
			if (rpc) await rpc.request("shutdown", { reason: "quit" }, Math.min(graceMs, 1_000)).catch(() => undefined);
		} finally {
			rpc?.close("sidecar stopped");
			try {
				child.stdin?.end();
			} catch {
				/* already closed */
			}
			const timer = setTimeout(() => {
				try {
					child.kill("SIGKILL");
				} catch {
					/* gone */
				}
			}, graceMs);
			timer.unref();
			if (child.exitCode === null && child.signalCode === null) {
				await new Promise<void>((res) => {
					child.once("exit", () => res());
					setTimeout(res, graceMs + 200).unref();
				});
			}
		}
	}

	/** Last resort at process exit: no waiting possible. */
	killNow(): void {
		try {
			this.child?.stdin?.end();
			this.child?.kill("SIGTERM");
		} catch {
			/* gone */
		}
	}

	private spawnChild(): void {
		const { cmd, args } = resolveCommand(this.env);
		this.state = "starting";
		this.lastError = undefined;
		let child: ChildProcess;
		try {
			child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"], env: this.env });
		} catch (e) {
			this.fail(`cannot start ${cmd}: ${(e as Error).message}`);
			return;
		}
		this.child = child;
		const rpc = new RpcClient(
			(line) => {
				child.stdin!.write(line);
			},
			(method, params) => this.events.onNotification(method, params),
		);
		this.rpc = rpc;
		child.stdout!.on("data", (chunk: Buffer) => rpc.feed(chunk));
		let stderrTail = "";
		child.stderr!.on("data", (chunk: Buffer) => {
			stderrTail = (stderrTail + chunk.toString("utf8")).slice(-2000);
		});
		child.stdin!.on("error", () => undefined); // EPIPE when it died: reported through "exit"
		child.on("error", (e) => {
			if (this.child !== child) return;
			this.fail(`cannot start ${cmd}: ${e.message}`);
		});
		child.on("exit", (code, signal) => {
			rpc.close("sidecar exited");
			if (this.child !== child || this.stopping) return;
			const tail = stderrTail.trim().split("\n").slice(-1)[0] ?? "";
			this.fail(`sidecar exited (${signal ?? `code ${code}`})${tail ? `: ${tail.slice(0, 200)}` : ""}`);
		});
		const ready = rpc.request<InitializeResult>("initialize", this.initParams(), INIT_TIMEOUT_MS).then(
			(result) => {
				if (this.child !== child) return result;
				this.state = "ready";
				this.backoffMs = FIRST_BACKOFF_MS;
				this.initResult = result;
				this.events.onStatus(result.footer);
				return result;
			},
			(e: Error) => {
				if (this.child === child) {
					const why = e instanceof RpcError ? e.message : `handshake failed: ${e.message}`;
					this.fail(why);
					try {
						child.kill("SIGKILL"); // hung or incompatible: do not leave it behind
					} catch {
						/* gone */
					}
				}
				throw e;
			},
		);
		ready.catch(() => undefined);
		this.ready = ready;
	}

	private fail(reason: string): void {
		this.state = "failed";
		this.lastError = reason;
		this.nextStartAt = Date.now() + this.backoffMs;
		this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
		this.rpc?.close(reason);
		this.child = undefined;
		this.events.onStatus(unavailable(reason));
	}
}

export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
	return new Promise<T>((resolvePromise, reject) => {
		const timer = setTimeout(() => reject(new RpcClosed(message)), ms);
		timer.unref?.();
		p.then(
			(v) => {
				clearTimeout(timer);
				resolvePromise(v);
			},
			(e: unknown) => {
				clearTimeout(timer);
				reject(e instanceof Error ? e : new Error(String(e)));
			},
		);
	});
}

export { PROTOCOL_VERSION };
