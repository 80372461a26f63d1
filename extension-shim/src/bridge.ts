/**
 * Wiring only: Pi events -> sidecar calls with deadlines, results -> Pi (system prompt, footer,
 * dialogs). Every handler is fail-open: on any problem it returns nothing and says why in the footer.
 */
import type {
	ExtensionAPI,
	ExtensionCommandContext,
	ExtensionContext,
	ToolDefinition,
} from "@earendil-works/pi-coding-agent";
import { getAgentDir, VERSION } from "@earendil-works/pi-coding-agent";
import { appendFileSync } from "node:fs";
import { liveUserTimestamps, projectEntries } from "./entries.ts";
import { footerOf, STARTING, unavailable } from "./footer.ts";
import { COMMANDS, TOOLS } from "./generated/tables.ts";
import {
	CLIENT_NAME,
	CLIENT_VERSION,
	PROTOCOL_VERSION,
	type CommandStep,
	type Footer,
	type InitializeParams,
	type RecallResult,
	type ToolCallResult,
	type TurnSettledResult,
} from "./protocol.ts";
import { RpcClosed, RpcTimeout } from "./rpc.ts";
import { Sidecar } from "./sidecar.ts";

const STATUS_KEY = "tdai-memory";
const DEFAULT_DEADLINE_MS = 3_000;
const DEADLINE_SLACK_MS = 150; // the sidecar enforces the deadline itself; this covers the pipe
const SESSION_CALL_MS = 2_000;
const COMMAND_CALL_MS = 30_000;
const CAPTURE_CALL_MS = 10_000;
const SHUTDOWN_CAPTURE_WAIT_MS = 2_000;
const REPLACEMENT_GRACE_MS = 3_000;

/** Benches set PI_MEMORY_BRIDGE_TIMINGS to a file: each hook appends how long Pi waited on it. */
const TIMINGS = process.env.PI_MEMORY_BRIDGE_TIMINGS;

function timed<A extends unknown[], R>(hook: string, fn: (...args: A) => R): (...args: A) => R {
	if (!TIMINGS) return fn;
	return (...args: A): R => {
		const started = performance.now();
		const record = (): void => {
			try {
				appendFileSync(TIMINGS, `${JSON.stringify({ hook, ms: performance.now() - started })}\n`);
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

/** Module state survives Pi's runtime replacement (fork/new/resume/reload re-run the factory). */
interface Shared {
	sidecar?: Sidecar;
	ctx?: ExtensionContext;
	/** What the status line shows: shown again when a replacement runtime starts (/new, /fork). */
	footer?: Footer;
	stopTimer?: ReturnType<typeof setTimeout>;
	captures: Set<Promise<unknown>>;
	runs: Map<string, unknown[][]>;
	exitHook: boolean;
}
const shared: Shared = { captures: new Set(), runs: new Map(), exitHook: false };

function showFooter(footer: Footer | null | undefined): void {
	if (!footer) return;
	shared.footer = footer;
	try {
		shared.ctx?.ui.setStatus(STATUS_KEY, footer.text);
	} catch {
		/* the ctx went stale with a runtime replacement */
	}
}

function sessionId(ctx: ExtensionContext): string {
	try {
		return ctx.sessionManager.getSessionId() || "unknown";
	} catch {
		return "unknown";
	}
}

function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

/** The footer for a failed call: the sidecar is not there, or says what failed. */
function failureFooter(what: string, e: unknown): Footer {
	const reason = errorText(e);
	return unavailable(e instanceof RpcClosed || e instanceof RpcTimeout ? reason : `${what} failed: ${reason}`);
}

function initParams(): InitializeParams {
	const ctx = shared.ctx;
	let trusted = false;
	try {
		trusted = ctx?.isProjectTrusted() ?? false;
	} catch {
		trusted = false;
	}
	let agentDir: string | undefined;
	try {
		agentDir = getAgentDir();
	} catch {
		agentDir = undefined;
	}
	return {
		protocolVersion: PROTOCOL_VERSION,
		client: { name: CLIENT_NAME, version: CLIENT_VERSION },
		piVersion: typeof VERSION === "string" ? VERSION : undefined,
		agentDir,
		cwd: ctx?.cwd ?? process.cwd(),
		projectTrusted: trusted,
		mode: ctx?.mode ?? "unknown",
		hasUi: ctx?.hasUI ?? false,
	};
}

function sidecar(): Sidecar {
	if (!shared.sidecar) {
		shared.sidecar = new Sidecar(initParams, {
			onStatus: showFooter,
			onNotification(method, params) {
				if (method === "status/changed") showFooter(footerOf(params));
			},
		});
	}
	if (!shared.exitHook) {
		shared.exitHook = true;
		process.once("exit", () => shared.sidecar?.killNow());
	}
	return shared.sidecar;
}

function recallDeadline(): number {
	return (shared.sidecar?.initResult?.recall.deadlineMs ?? DEFAULT_DEADLINE_MS) + DEADLINE_SLACK_MS;
}

function sessionPayload(ctx: ExtensionContext, reason?: string): Record<string, unknown> {
	const sm = ctx.sessionManager;
	return {
		piSessionId: sessionId(ctx),
		sessionFile: sm.getSessionFile() ?? null,
		reason: reason ?? null,
		entries: projectEntries(sm.getEntries()),
		leafId: sm.getLeafId() ?? null,
	};
}

async function runCommand(name: string, args: string, ctx: ExtensionCommandContext): Promise<CommandStep | undefined> {
	shared.ctx = ctx;
	const sc = sidecar();
	const show = (message: string, level: "info" | "warning" | "error"): void => {
		if (!message) return;
		if (ctx.hasUI) ctx.ui.notify(message, level);
		else process.stderr.write(`${message}\n`); // print/json mode has no UI to show it
	};
	try {
		let step = await sc.call<CommandStep>(
			"command/run",
			{ name, args, hasUi: ctx.hasUI, piSessionId: sessionId(ctx) },
			COMMAND_CALL_MS,
		);
		while (step.kind !== "done") {
			let answer: boolean | string | null = null;
			if (ctx.hasUI) {
				// select/input dialogs have no body: show what the choice is about first
				if (step.message) ctx.ui.notify(step.message, "info");
				if (step.kind === "select") answer = (await ctx.ui.select(step.title, step.options)) ?? null;
				else answer = (await ctx.ui.input(step.title, step.placeholder)) ?? null;
			}
			step = await sc.call<CommandStep>("command/answer", { flowId: step.flowId, answer }, COMMAND_CALL_MS);
		}
		showFooter(step.footer);
		show(step.message, step.level);
		return step;
	} catch (e) {
		showFooter(failureFooter(name, e));
		show(`pi-memory-bridge: ${errorText(e)}`, "error");
		return undefined;
	}
}

type ToolOutput = { content: { type: "text"; text: string }[]; details: Record<string, unknown> };

/** What Pi draws for a tool result (a pi-tui component), made from plain text. */
export type TextComponent = ReturnType<NonNullable<ToolDefinition["renderResult"]>>;
export type MakeText = (text: string) => TextComponent;

const COLLAPSED_LINES = 8;

/** The readable text of a tool result (the sidecar's `details.display`, without the untrusted
 * wrapper the model gets), cut to a few lines until the user expands it. */
export function resultText(result: { content: unknown[]; details?: unknown }, expanded: boolean): string {
	const display = (result.details as { display?: unknown } | undefined)?.display;
	const first = result.content[0] as { type?: unknown; text?: unknown } | undefined;
	const text = typeof display === "string" ? display : typeof first?.text === "string" ? first.text : "";
	const lines = text.split("\n");
	if (expanded || lines.length <= COLLAPSED_LINES) return text;
	return [...lines.slice(0, COLLAPSED_LINES), `… ${lines.length - COLLAPSED_LINES} more line(s) (expand to see)`].join("\n");
}

async function callTool(name: string, args: Record<string, unknown>, ctx: ExtensionContext): Promise<ToolOutput> {
	shared.ctx = ctx;
	let result: ToolCallResult;
	try {
		result = await sidecar().call<ToolCallResult>(
			"tool/call",
			{ piSessionId: sessionId(ctx), name, arguments: args },
			recallDeadline,
		);
	} catch (e) {
		result = { text: `Memory unavailable (${errorText(e)}). Continue without memory.`, details: {}, isError: true };
	}
	if (result.isError) throw new Error(result.text);
	return { content: [{ type: "text" as const, text: result.text }], details: result.details };
}

/** One Pi tool per row of the sidecar's table: the shim holds no tool of its own. */
function registerTools(pi: ExtensionAPI, makeText: MakeText | undefined): void {
	for (const row of TOOLS) {
		pi.registerTool({
			renderResult: makeText ? (result, options) => makeText(resultText(result, options.expanded)) : undefined,
			name: row.name,
			label: row.label,
			description: row.description,
			promptSnippet: row.promptSnippet,
			parameters: row.parameters,
			execute: (_id, params, _signal, _onUpdate, ctx) => callTool(row.name, params as Record<string, unknown>, ctx),
		});
	}
}

/** One Pi command per row of the sidecar's table. */
function registerCommands(pi: ExtensionAPI): void {
	for (const row of COMMANDS) {
		pi.registerCommand(row.name, {
			description: row.description,
			handler: async (args, ctx) => {
				const step = await runCommand(row.command, args, ctx);
				if (step?.reload) await ctx.reload(); // Pi reads skills and configuration at start-up
			},
		});
	}
}

export interface BridgeHost {
	/** Pi's text component (pi-tui `Text`), to draw tool results readably; none: Pi's default. */
	makeText?: MakeText;
}

export function createMemoryBridge(pi: ExtensionAPI, host: BridgeHost = {}): void {
	registerTools(pi, host.makeText);
	registerCommands(pi);

	pi.on("session_start", (event, ctx) => {
		shared.ctx = ctx;
		if (shared.stopTimer) {
			clearTimeout(shared.stopTimer);
			shared.stopTimer = undefined;
		}
		const sc = sidecar();
		sc.ensureStarted();
		// a replacement runtime (/new, /fork, /resume) starts with an empty status line
		showFooter(sc.state === "starting" ? STARTING : shared.footer);
		// not awaited: Pi's start-up must not wait for the sidecar
		sc.call("session/start", sessionPayload(ctx, event.reason), SESSION_CALL_MS).catch(() => undefined);
	});

	pi.on("session_tree", (_event, ctx) => {
		shared.ctx = ctx;
		sidecar().call("session/tree", sessionPayload(ctx, "tree"), SESSION_CALL_MS).catch(() => undefined);
	});

	pi.on("before_agent_start", timed("before_agent_start", async (event, ctx) => {
		shared.ctx = ctx;
		const prompt = (event as { prompt?: unknown }).prompt;
		if (typeof prompt !== "string" || !prompt.trim()) return undefined; // 1.x custom-message runs
		shared.runs.set(sessionId(ctx), []);
		try {
			const result = await sidecar().call<RecallResult>(
				"recall",
				{ piSessionId: sessionId(ctx), prompt, liveUserTimestamps: liveUserTimestamps(ctx.sessionManager.getBranch()) },
				recallDeadline,
			);
			showFooter(result.footer);
			if (!result.block) return undefined;
			return { systemPrompt: `${event.systemPrompt}\n\n${result.block}` };
		} catch (e) {
			showFooter(failureFooter("recall", e));
			return undefined;
		}
	}));

	pi.on("agent_end", (event, ctx) => {
		const sid = sessionId(ctx);
		const runs = shared.runs.get(sid) ?? [];
		runs.push(Array.isArray(event.messages) ? (event.messages as unknown[]) : []);
		shared.runs.set(sid, runs);
	});

	pi.on("agent_settled", timed("agent_settled", (event, ctx) => {
		shared.ctx = ctx;
		const sid = sessionId(ctx);
		const runs = shared.runs.get(sid) ?? [];
		shared.runs.delete(sid);
		if (runs.length === 0) return;
		const aborted = (event as { aborted?: unknown }).aborted;
		const payload = {
			...sessionPayload(ctx),
			runs,
			aborted: typeof aborted === "boolean" ? aborted : null,
		};
		delete (payload as { reason?: unknown }).reason;
		delete (payload as { sessionFile?: unknown }).sessionFile;
		// fire and forget: Pi never waits on capture; session_shutdown gives in-flight captures a moment
		const p = sidecar()
			.call<TurnSettledResult>("turn/settled", payload, CAPTURE_CALL_MS)
			.then((r) => showFooter(r.footer))
			.catch((e: unknown) => showFooter(failureFooter("capture", e)))
			.finally(() => shared.captures.delete(p));
		shared.captures.add(p);
	}));

	pi.on("session_shutdown", async (event) => {
		if (shared.captures.size > 0) {
			await Promise.race([
				Promise.allSettled([...shared.captures]),
				new Promise((r) => setTimeout(r, SHUTDOWN_CAPTURE_WAIT_MS).unref()),
			]);
		}
		const sc = shared.sidecar;
		if (!sc) return;
		if (event.reason === "quit" || event.reason === "reload") {
			// on reload the sidecar must read the configuration again (e.g. after /tdai-memory-setup)
			shared.sidecar = undefined;
			await sc.stop();
			return;
		}
		// fork/new/resume/reload: a new session_start follows at once; keep the sidecar warm for it
		shared.stopTimer = setTimeout(() => {
			if (shared.sidecar === sc) shared.sidecar = undefined;
			void sc.stop();
		}, REPLACEMENT_GRACE_MS);
		shared.stopTimer.unref();
	});
}
