/**
 * Wiring only: Pi events -> sidecar calls with deadlines, results -> Pi (system prompt, footer,
 * dialogs). Every handler is fail-open: on any problem it returns nothing and says why in the footer.
 *
 * Nothing here imports Pi at run time: Pi's own pieces (its text component, its agent dir) and the
 * sidecar factory come in through `BridgeHost`, so tests drive the bridge with a fake Pi and a fake
 * sidecar (extension-shim/test/bridge.test.ts).
 *
 * The sidecar also talks back: `model/complete` requests (learning runs one completion on the
 * user's model, model.ts), `notice` (a one-line message) and `learning/consent` (ask once whether
 * memory may learn; the `learning` command asks it).
 */
import type {
	ExtensionAPI,
	ExtensionContext,
	ToolDefinition,
} from "@earendil-works/pi-coding-agent";
import { appendFileSync } from "node:fs";
import { liveUserTimestamps, projectEntries } from "./entries.ts";
import { footerOf, STARTING, unavailable } from "./footer.ts";
import { COMMANDS, TOOLS } from "./generated/tables.ts";
import type { Located } from "./locate.ts";
import { completeOnModel } from "./model.ts";
import {
	CLIENT_NAME,
	CLIENT_VERSION,
	PROTOCOL_VERSION,
	type CommandStep,
	type Footer,
	type InitializeParams,
	type InitializeResult,
	type Method,
	type Requests,
	type SessionParams,
	type ToolCallResult,
	type TurnSettledParams,
} from "./protocol.ts";
import { RpcClosed, RpcError, RpcTimeout, type RequestOptions } from "./rpc.ts";
import { settleWithin, Sidecar, type SidecarEvents, type SidecarState } from "./sidecar.ts";
import { markCaptureSince } from "./since.ts";

const STATUS_KEY = "tdai-memory";
const DEFAULT_DEADLINE_MS = 3_000;
const DEADLINE_SLACK_MS = 150; // the sidecar enforces the deadline itself; this covers the pipe
const SESSION_CALL_MS = 2_000;
const COMMAND_CALL_MS = 30_000;
const CAPTURE_CALL_MS = 10_000;
const SHUTDOWN_WAIT_MS = 500; // in-flight captures of an answering sidecar, in total; none for any other
const REPLACEMENT_GRACE_MS = 3_000;
const LEVELS = new Set(["info", "warning", "error"]);
// a call Pi awaits keeps Node's event loop up until its answer or deadline (print mode exits otherwise)
const HOLD: RequestOptions = { hold: true };
const COLLAPSED_LINES = 8;

/** What the bridge needs of the sidecar process (`Sidecar` is the real one). */
export interface SidecarLike {
	readonly state: SidecarState;
	readonly initResult: InitializeResult | undefined;
	/** Ready, and it has not let a call run out of time since its last answer. */
	readonly answering: boolean;
	/** Spawn the process without a handshake, so its start-up overlaps Pi's. */
	prestart(): void;
	ensureStarted(): void;
	call<T>(method: string, params: unknown, timeoutMs: number | (() => number), options?: RequestOptions): Promise<T>;
	/** Let go without waiting (stdin closed; a child that never answered is killed). */
	stop(): void;
	killNow(): void;
}
/** `handshakeMs`: how long the handshake may take (the recall deadline, so a turn never waits longer). */
export type SidecarFactory = (
	initParams: () => InitializeParams,
	events: SidecarEvents,
	handshakeMs: () => number,
) => SidecarLike;

/** What Pi draws for a tool result (a pi-tui component), made from plain text. */
export type TextComponent = ReturnType<NonNullable<ToolDefinition["renderResult"]>>;
export type MakeText = (text: string) => TextComponent;

/** State that outlives one runtime: Pi re-runs the factory on fork/new/resume/reload. */
export interface BridgeState {
	sidecar?: SidecarLike;
	ctx?: ExtensionContext;
	/** What the status line shows: shown again when a replacement runtime starts (/new, /fork). */
	footer?: Footer;
	stopTimer?: ReturnType<typeof setTimeout>;
	captures: Set<Promise<unknown>>;
	runs: Map<string, unknown[][]>;
	exitHook: boolean;
}

export function newBridgeState(): BridgeState {
	return { captures: new Set(), runs: new Map(), exitHook: false };
}

export interface BridgeHost {
	/** Survives runtime replacement: index.ts keeps one per Pi process. */
	state?: BridgeState;
	/** Starts the sidecar process; default: the real `Sidecar`. */
	newSidecar?: SidecarFactory;
	/** Pi's agent dir (`getAgentDir()`); default: the sidecar's own default. */
	agentDir?: () => string | undefined;
	/** Pi's text component (pi-tui `Text`), to draw tool results readably; none: Pi's default. */
	makeText?: MakeText;
	/** Benches set PI_MEMORY_BRIDGE_TIMINGS to a file: each hook appends how long Pi waited on it. */
	timingsFile?: string;
	/** Where the real sidecar is (default locate.ts `locateSidecar`); only the default factory uses it. */
	locate?: (env: NodeJS.ProcessEnv) => Located;
	/** Records when memory first ran in this agent dir (default since.ts `markCaptureSince`). */
	markCaptureSince?: (agentDir: string | undefined) => void;
	/** Runs one completion on the user's model for the sidecar (default model.ts `completeOnModel`). */
	completeOnModel?: (ctx: ExtensionContext | undefined, params: unknown) => Promise<unknown>;
}

function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

/** The footer for a failed call: the sidecar is not there, or says what failed. */
export function failureFooter(what: string, e: unknown): Footer {
	const reason = errorText(e);
	return unavailable(e instanceof RpcClosed || e instanceof RpcTimeout ? reason : `${what} failed: ${reason}`);
}

/** The readable text of a tool result (the sidecar's `details.display`, without the untrusted
 * wrapper the model gets), cut to a few lines until the user expands it. */
export function resultText(result: { content: unknown[]; details?: unknown }, expanded: boolean): string {
	const display = (result.details as { display?: unknown } | undefined)?.display;
	const first = result.content[0] as { type?: unknown; text?: unknown } | undefined;
	const text = typeof display === "string" ? display : typeof first?.text === "string" ? first.text : "";
	const lines = text.split("\n");
	if (expanded || lines.length <= COLLAPSED_LINES) return text;
	const hidden = lines.length - COLLAPSED_LINES;
	return [...lines.slice(0, COLLAPSED_LINES), `… ${hidden} more ${hidden === 1 ? "line" : "lines"} (expand to see)`].join("\n");
}

function sessionId(ctx: ExtensionContext): string {
	try {
		return ctx.sessionManager.getSessionId() || "unknown";
	} catch {
		return "unknown";
	}
}

function timed<A extends unknown[], R>(file: string | undefined, hook: string, fn: (...args: A) => R): (...args: A) => R {
	if (!file) return fn;
	return (...args: A): R => {
		const started = performance.now();
		const record = (): void => {
			try {
				appendFileSync(file, `${JSON.stringify({ hook, ms: performance.now() - started, pid: process.pid })}\n`);
			} catch {
				/* a bench aid must never break Pi */
			}
		};
		const out = fn(...args);
		if (out instanceof Promise) void out.finally(record);
		else record();
		return out;
	};
}

type ToolOutput = { content: { type: "text"; text: string }[]; details: Record<string, unknown> };

class Bridge {
	private readonly host: BridgeHost;
	private readonly s: BridgeState;
	private readonly newSidecar: SidecarFactory;

	constructor(host: BridgeHost) {
		this.host = host; // no parameter property: Node's type stripping (the shim's tests) refuses them
		this.s = host.state ?? newBridgeState();
		const locate = host.locate;
		this.newSidecar =
			host.newSidecar ?? ((init, events, handshakeMs) => new Sidecar(init, events, process.env, { handshakeMs, locate }));
	}

	private showFooter(footer: Footer | null | undefined): void {
		if (!footer) return;
		this.s.footer = footer;
		try {
			this.s.ctx?.ui.setStatus(STATUS_KEY, footer.text);
		} catch {
			/* the ctx went stale with a runtime replacement */
		}
	}

	private initParams(): InitializeParams {
		const ctx = this.s.ctx;
		let trusted = false;
		try {
			trusted = ctx?.isProjectTrusted() ?? false;
		} catch {
			trusted = false;
		}
		let agentDir: string | undefined;
		try {
			agentDir = this.host.agentDir?.();
		} catch {
			agentDir = undefined;
		}
		return {
			protocolVersion: PROTOCOL_VERSION,
			client: { name: CLIENT_NAME, version: CLIENT_VERSION },
			agentDir,
			cwd: ctx?.cwd ?? process.cwd(),
			projectTrusted: trusted,
			hasUi: ctx?.hasUI ?? false,
		};
	}

	private sidecar(): SidecarLike {
		if (!this.s.sidecar) {
			this.s.sidecar = this.newSidecar(
				() => this.initParams(),
				{
					onStatus: (footer) => this.showFooter(footer),
					onNotification: (method, params) => this.notified(method, params),
					onRequest: (method, params) => this.requested(method, params),
				},
				this.recallDeadline,
			);
		}
		if (!this.s.exitHook) {
			this.s.exitHook = true;
			process.once("exit", () => this.s.sidecar?.killNow());
		}
		return this.s.sidecar;
	}

	/** What the sidecar tells the shim: the footer, a message for the user, the consent question. */
	private notified(method: string, params: unknown): void {
		const ctx = this.s.ctx;
		if (method === "status/changed") {
			this.showFooter(footerOf(params));
		} else if (method === "notice") {
			const n = (params ?? {}) as { message?: unknown; level?: unknown };
			const level = typeof n.level === "string" && LEVELS.has(n.level) ? (n.level as "info" | "warning" | "error") : "info";
			try {
				if (typeof n.message === "string" && ctx?.hasUI) ctx.ui.notify(n.message, level);
			} catch {
				/* the ctx went stale with a runtime replacement */
			}
		} else if (method === "learning/consent" && ctx?.hasUI) {
			const m = ctx.model; // the question names the model the conversation would go to
			void this.runCommand("learning", m ? `ask ${m.provider}/${m.id}` : "ask", ctx);
		}
	}

	/** What the sidecar asks of the shim: only `model/complete`. */
	private requested(method: string, params: unknown): Promise<unknown> {
		if (method !== "model/complete") return Promise.reject(new RpcError(-32601, `the shim serves no ${method}`));
		return (this.host.completeOnModel ?? completeOnModel)(this.s.ctx, params);
	}

	/** A typed request: its params and result come from `Requests` (protocol.ts). */
	private call<M extends Method>(
		method: M,
		params: Requests[M]["params"],
		timeoutMs: number | (() => number),
		options: RequestOptions = {},
	): Promise<Requests[M]["result"]> {
		return this.sidecar().call<Requests[M]["result"]>(method, params, timeoutMs, options);
	}

	private readonly recallDeadline = (): number =>
		(this.s.sidecar?.initResult?.recall.deadlineMs ?? DEFAULT_DEADLINE_MS) + DEADLINE_SLACK_MS;

	private sessionParams(ctx: ExtensionContext): SessionParams {
		const sm = ctx.sessionManager;
		return {
			piSessionId: sessionId(ctx),
			sessionFile: sm.getSessionFile() ?? null,
			entries: projectEntries(sm.getEntries()),
			leafId: sm.getLeafId() ?? null,
		};
	}

	/** A run Pi keeps: `--no-session` has no session file (both 0.84 and 1.x return undefined then). */
	private sessionPersisted(ctx: ExtensionContext): boolean {
		try {
			return ctx.sessionManager.getSessionFile() !== undefined;
		} catch {
			return true; // unknown: let the sidecar's usual rules decide
		}
	}

	private async runCommand(name: string, args: string, ctx: ExtensionContext): Promise<CommandStep | undefined> {
		this.s.ctx = ctx;
		const show = (message: string, level: "info" | "warning" | "error"): void => {
			if (!message) return;
			let hasUi: boolean;
			try {
				hasUi = ctx.hasUI;
				if (hasUi) ctx.ui.notify(message, level);
			} catch {
				return; // the ctx went stale with a runtime replacement: its session is gone, and its message
			}
			if (!hasUi) process.stderr.write(`${message}\n`); // print/json mode has no UI to show it
		};
		try {
			let step = await this.call(
				"command/run",
				{ name, args, hasUi: ctx.hasUI, piSessionId: sessionId(ctx) },
				COMMAND_CALL_MS,
				HOLD,
			);
			while (step.kind !== "done") {
				let answer: string | null = null;
				if (ctx.hasUI) {
					// select/input dialogs have no body: show what the choice is about first
					if (step.message) ctx.ui.notify(step.message, "info");
					if (step.kind === "select") answer = (await ctx.ui.select(step.title, step.options)) ?? null;
					else if (step.kind === "editor") answer = (await ctx.ui.editor(step.title, step.prefill ?? "")) ?? null;
					else answer = (await ctx.ui.input(step.title, step.placeholder)) ?? null;
				}
				step = await this.call("command/answer", { flowId: step.flowId ?? "", answer }, COMMAND_CALL_MS, HOLD);
			}
			this.showFooter(step.footer);
			show(step.message, step.level);
			return step;
		} catch (e) {
			this.showFooter(failureFooter(name, e));
			show(`pi-memory-bridge: ${errorText(e)}`, "error");
			return undefined;
		}
	}

	private async callTool(name: string, args: Record<string, unknown>, ctx: ExtensionContext): Promise<ToolOutput> {
		this.s.ctx = ctx;
		let result: ToolCallResult;
		try {
			result = await this.call("tool/call", { name, arguments: args }, this.recallDeadline, HOLD);
		} catch (e) {
			result = { text: `Memory unavailable (${errorText(e)}). Continue without memory.`, details: {}, isError: true };
		}
		if (result.isError) throw new Error(result.text);
		return { content: [{ type: "text" as const, text: result.text }], details: result.details };
	}

	/** One Pi tool per row of the sidecar's table: the shim holds no tool of its own. */
	private registerTools(pi: ExtensionAPI): void {
		const makeText = this.host.makeText;
		for (const row of TOOLS) {
			pi.registerTool({
				name: row.name,
				label: row.label,
				description: row.description,
				promptSnippet: row.promptSnippet,
				parameters: row.parameters,
				execute: (_id, params, _signal, _onUpdate, ctx) => this.callTool(row.name, params as Record<string, unknown>, ctx),
				renderResult: makeText ? (result, options) => makeText(resultText(result, options.expanded)) : undefined,
			});
		}
	}

	/** One Pi command per row of the sidecar's table. */
	private registerCommands(pi: ExtensionAPI): void {
		for (const row of COMMANDS) {
			pi.registerCommand(row.name, {
				description: row.description,
				handler: async (args, ctx) => {
					const step = await this.runCommand(row.command, args, ctx);
					if (step?.reload) await ctx.reload(); // Pi reads skills and configuration at start-up
				},
			});
		}
	}

	register(pi: ExtensionAPI): void {
		// synchronous: Pi lists commands before the sidecar has started
		this.registerTools(pi);
		this.registerCommands(pi);
		// the interpreter loads while Pi is still starting; the handshake waits for session_start
		this.sidecar().prestart();
		const s = this.s;
		const timings = this.host.timingsFile;
		const markSince = this.host.markCaptureSince ?? markCaptureSince;

		pi.on("session_start", (_event, ctx) => {
			s.ctx = ctx;
			if (s.stopTimer) {
				clearTimeout(s.stopTimer);
				s.stopTimer = undefined;
			}
			markSince(this.initParams().agentDir); // before any turn: catch-up may recover from here on
			const sc = this.sidecar();
			sc.ensureStarted();
			// a replacement runtime (/new, /fork, /resume) starts with an empty status line
			this.showFooter(sc.state === "starting" ? STARTING : s.footer);
			// not awaited: Pi's start-up must not wait for the sidecar
			this.call("session/start", this.sessionParams(ctx), SESSION_CALL_MS).catch(() => undefined);
		});

		pi.on("session_tree", (_event, ctx) => {
			s.ctx = ctx;
			this.call("session/tree", this.sessionParams(ctx), SESSION_CALL_MS).catch(() => undefined);
		});

		pi.on("before_agent_start", timed(timings, "before_agent_start", async (event, ctx) => {
			s.ctx = ctx;
			const prompt = (event as { prompt?: unknown }).prompt;
			if (typeof prompt !== "string" || !prompt.trim()) return undefined; // 1.x custom-message runs
			s.runs.set(sessionId(ctx), []);
			try {
				const result = await this.call(
					"recall",
					{ piSessionId: sessionId(ctx), prompt, liveUserTimestamps: liveUserTimestamps(ctx.sessionManager.getBranch()) },
					this.recallDeadline,
					HOLD,
				);
				this.showFooter(result.footer);
				if (!result.block) return undefined;
				return { systemPrompt: `${event.systemPrompt}\n\n${result.block}` };
			} catch (e) {
				this.showFooter(failureFooter("recall", e));
				return undefined;
			}
		}));

		pi.on("session_before_compact", (_event, ctx) => {
			s.ctx = ctx;
			// learn from what is about to be summarised; never holds up the compaction
			this.call("learning/trigger", { piSessionId: sessionId(ctx), reason: "compact" }, SESSION_CALL_MS).catch(
				() => undefined,
			);
			return undefined;
		});

		pi.on("agent_end", (event, ctx) => {
			const sid = sessionId(ctx);
			const runs = s.runs.get(sid) ?? [];
			runs.push(Array.isArray(event.messages) ? (event.messages as unknown[]) : []);
			s.runs.set(sid, runs);
		});

		pi.on("agent_settled", timed(timings, "agent_settled", (event, ctx) => {
			s.ctx = ctx;
			const sid = sessionId(ctx);
			const runs = s.runs.get(sid) ?? [];
			s.runs.delete(sid);
			if (runs.length === 0) return;
			const aborted = (event as { aborted?: unknown }).aborted;
			const sm = ctx.sessionManager;
			const params: TurnSettledParams = {
				piSessionId: sid,
				runs,
				aborted: typeof aborted === "boolean" ? aborted : null,
				entries: projectEntries(sm.getEntries()),
				leafId: sm.getLeafId() ?? null,
				sessionPersisted: this.sessionPersisted(ctx),
			};
			// fire and forget: Pi never waits on capture; session_shutdown gives in-flight captures a moment
			const p = this.call("turn/settled", params, CAPTURE_CALL_MS)
				.then((r) => this.showFooter(r.footer))
				.catch((e: unknown) => this.showFooter(failureFooter("capture", e)))
				.finally(() => s.captures.delete(p));
			s.captures.add(p);
		}));

		pi.on("session_shutdown", timed(timings, "session_shutdown", async (event) => {
			const sc = s.sidecar;
			// a sidecar that is not ready, or stopped answering, gets no wait at all
			if (sc?.answering && s.captures.size > 0) await settleWithin([...s.captures], SHUTDOWN_WAIT_MS);
			if (!sc) return;
			if (event.reason === "quit" || event.reason === "reload") {
				// on reload the sidecar must read the configuration again (e.g. after /tdai-memory-setup)
				s.sidecar = undefined;
				sc.stop();
				return;
			}
			// fork/new/resume: a new session_start follows at once; keep the sidecar warm for it
			s.stopTimer = setTimeout(() => {
				if (s.sidecar === sc) s.sidecar = undefined;
				sc.stop();
			}, REPLACEMENT_GRACE_MS);
			s.stopTimer.unref();
		}));
	}
}

export function createMemoryBridge(pi: ExtensionAPI, host: BridgeHost = {}): void {
	new Bridge(host).register(pi);
}
