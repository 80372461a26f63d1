/**
 * The sidecar process: spawn, handshake, deadlines, crash restart with backoff, stop.
 * Nothing here ever throws into Pi: callers get a rejected promise they turn into "no memory".
 *
 * The process may be spawned early (`prestart`, when Pi loads the extension) so the interpreter
 * loads while Pi itself starts; the handshake follows once the session is known (`ensureStarted`).
 *
 * Deadlines, so memory never holds Pi past them:
 * - the handshake must be answered within the recall deadline, or the child is killed and every
 *   call waiting for it fails at that moment; so is it when a call Pi awaits runs out of time
 *   before the sidecar ever answered;
 * - the child and its pipes are unref'd: they never keep Pi's process alive. A call Pi awaits
 *   (`hold`) keeps the event loop up until its answer or its deadline, no longer;
 * - `stop` never waits: it closes stdin (the sidecar exits on EOF, bounded by its own watchdog)
 *   and kills a child that never answered or stopped answering.
 */
import { spawn } from "node:child_process";
import type { Socket } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { openDaemon, type SidecarChild } from "./daemon.ts";
import { unavailable } from "./footer.ts";
import { locateSidecar, type Located } from "./locate.ts";
import { RpcClient, RpcClosed, RpcError, RpcTimeout, type RequestHandler, type RequestOptions } from "./rpc.ts";
import { PROTOCOL_VERSION, type Footer, type InitializeParams, type InitializeResult } from "./protocol.ts";

export const SHIM_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** The handshake's deadline when the caller gives none (the default recall deadline + pipe slack). */
export const DEFAULT_HANDSHAKE_MS = 3_150;
const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 60_000;

export type SidecarState = "idle" | "starting" | "ready" | "failed" | "stopped";

export interface SidecarEvents {
	onStatus(footer: Footer): void;
	onNotification(method: string, params: unknown): void;
	onRequest?: RequestHandler; // requests from the sidecar (model/complete)
}

export interface SidecarOptions {
	/** How long the handshake may take, read at each spawn: the recall deadline, so a turn never waits longer. */
	handshakeMs?: () => number;
	/** Where the sidecar is, looked up at each spawn; default `locateSidecar` (locate.ts). */
	locate?: (env: NodeJS.ProcessEnv) => Located;
}

export class Sidecar {
	state: SidecarState = "idle";
	lastError: string | undefined;
	initResult: InitializeResult | undefined;
	private child: SidecarChild | undefined;
	private rpc: RpcClient | undefined;
	private ready: Promise<InitializeResult> | undefined;
	private backoffMs = FIRST_BACKOFF_MS;
	private nextStartAt = 0;
	private stopping = false;
	private readonly events: SidecarEvents;
	private readonly initParams: () => InitializeParams;
	private readonly env: NodeJS.ProcessEnv;
	private readonly handshakeMs: () => number;
	private readonly locate: (env: NodeJS.ProcessEnv) => Located;

	constructor(
		initParams: () => InitializeParams,
		events: SidecarEvents,
		env: NodeJS.ProcessEnv = process.env,
		options: SidecarOptions = {},
	) {
		this.initParams = initParams;
		this.events = events;
		this.env = env;
		this.handshakeMs = options.handshakeMs ?? (() => DEFAULT_HANDSHAKE_MS);
		this.locate = options.locate ?? ((e) => locateSidecar(e, SHIM_DIR));
	}

	get pid(): number | undefined {
		return this.child?.pid;
	}

	/** Spawn the process without a handshake yet, so its start-up overlaps Pi's. Never blocks. */
	prestart(): void {
		if (this.stopping || this.child || this.state === "starting" || this.state === "ready") return;
		if (this.state === "failed" && Date.now() < this.nextStartAt) return;
		this.spawnChild();
	}

	/** Start in the background if not running (and not inside a crash backoff). Never blocks. */
	ensureStarted(): void {
		if (this.stopping || this.state === "starting" || this.state === "ready") return;
		if (this.state === "failed" && Date.now() < this.nextStartAt) return;
		if (!this.child) this.spawnChild();
		const child = this.child;
		const rpc = this.rpc;
		if (child && rpc && this.state !== "failed") this.handshake(child, rpc);
	}

	/**
	 * Call a method, waiting for the handshake within the same deadline. `timeoutMs` may be a
	 * function: it is read again once the handshake is done, since the configured deadline is only
	 * known from the handshake's answer. A handshake that misses its own deadline fails this call
	 * at that moment, whatever is left of `timeoutMs`.
	 */
	async call<T>(
		method: string,
		params: unknown,
		timeoutMs: number | (() => number),
		options: RequestOptions = {},
	): Promise<T> {
		this.ensureStarted();
		const ready = this.ready;
		const rpc = this.rpc;
		if (!ready || !rpc || this.state === "failed") throw new RpcClosed(this.lastError ?? "sidecar not running");
		const budget = (): number => (typeof timeoutMs === "function" ? timeoutMs() : timeoutMs);
		const started = Date.now();
		if (this.state !== "ready") {
			const wait = budget();
			try {
				await withTimeout(ready, wait, `sidecar not ready within ${wait} ms`, options.hold);
			} catch (e) {
				// Pi stopped waiting for a sidecar that never answered: nothing will wait on this one again
				if (options.hold && this.ready === ready && this.state === "starting") this.giveUp(errorText(e));
				throw e;
			}
		}
		const left = budget() - (Date.now() - started);
		if (left <= 0) throw new RpcTimeout(method, budget());
		return rpc.request<T>(method, params, left, options);
	}

	get inFlight(): number {
		return this.rpc?.inFlight ?? 0;
	}

	/** Ready, and it has not let a call run out of time since its last answer. */
	get answering(): boolean {
		return this.state === "ready" && this.rpc !== undefined && !this.rpc.unresponsive;
	}

	/**
	 * Let go of the sidecar without waiting for it: pending calls fail, stdin is closed (the
	 * sidecar finishes what it holds and exits on EOF, bounded by its own watchdog), and a child
	 * that never answered the handshake or stopped answering is killed outright.
	 */
	stop(): void {
		this.stopping = true;
		const child = this.child;
		const answering = this.answering;
		this.rpc?.close("sidecar stopped");
		this.child = undefined;
		this.rpc = undefined;
		this.ready = undefined;
		this.state = "stopped";
		if (!child) return;
		try {
			child.stdin?.end();
		} catch {
			/* already closed */
		}
		if (!answering) kill(child, "SIGKILL");
	}

	/** Last resort at process exit: no waiting possible. */
	killNow(): void {
		const child = this.child;
		if (!child) return;
		try {
			child.stdin?.end();
		} catch {
			/* gone */
		}
		kill(child, this.answering ? "SIGTERM" : "SIGKILL");
	}

	private spawnChild(): void {
		const found = this.locate(this.env);
		if (!found.ok) return this.fail(found.reason);
		const { cmd, args } = found;
		this.state = "idle";
		this.lastError = undefined;
		let child: SidecarChild;
		try {
			// the shared background sidecar when switched on and usable, else a child of our own
			child = openDaemon(cmd, args, this.env) ?? spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"], env: this.env });
		} catch (e) {
			this.fail(`cannot start ${cmd}: ${(e as Error).message}`);
			return;
		}
		this.child = child;
		detach(child);
		const rpc = new RpcClient(
			(line) => {
				child.stdin!.write(line);
			},
			(method, params) => this.events.onNotification(method, params),
			this.events.onRequest,
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
	}

	/** Send `initialize`; the handshake's deadline runs from now. */
	private handshake(child: SidecarChild, rpc: RpcClient): void {
		this.state = "starting";
		const ready = rpc.request<InitializeResult>("initialize", this.initParams(), this.handshakeMs()).then(
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
					// hung or incompatible: do not leave it behind
					this.giveUp(e instanceof RpcError ? e.message : `handshake failed: ${e.message}`);
				}
				throw e;
			},
		);
		ready.catch(() => undefined);
		this.ready = ready;
	}

	private giveUp(reason: string): void {
		const child = this.child;
		this.fail(reason);
		if (child) kill(child, "SIGKILL");
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

function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

/** The child never keeps Pi's process alive: not the process handle, not its stdio pipes. */
function detach(child: SidecarChild): void {
	child.unref();
	for (const stream of [child.stdin, child.stdout, child.stderr]) {
		(stream as Partial<Pick<Socket, "unref">> | null)?.unref?.(); // stdio pipes are net.Sockets
	}
}

function kill(child: SidecarChild, signal: NodeJS.Signals): void {
	try {
		child.kill(signal);
	} catch {
		/* gone */
	}
}

/** `p`, or RpcClosed after `ms`; `hold` keeps the event loop alive meanwhile (Pi awaits it). */
export function withTimeout<T>(p: Promise<T>, ms: number, message: string, hold = false): Promise<T> {
	return new Promise<T>((resolvePromise, reject) => {
		const timer = setTimeout(() => reject(new RpcClosed(message)), Math.max(0, ms));
		if (!hold) timer.unref?.();
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

/** Wait for `promises` to settle, at most `ms`; the wait holds the event loop (Pi awaits it). */
export async function settleWithin(promises: readonly Promise<unknown>[], ms: number): Promise<void> {
	let timer: ReturnType<typeof setTimeout> | undefined;
	const deadline = new Promise<void>((r) => {
		timer = setTimeout(r, Math.max(0, ms));
	});
	await Promise.race([Promise.allSettled(promises), deadline]);
	clearTimeout(timer);
}

export { PROTOCOL_VERSION };
