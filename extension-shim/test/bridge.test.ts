/**
 * The bridge with a fake Pi and a fake sidecar (the factory is injected): what Pi is given to
 * register, what the footer shows over a turn and across a replacement runtime, how a command's
 * dialog and its reload flag reach Pi, how a tool result is drawn, and what the sidecar asks of
 * the shim (`model/complete`) and tells it (`notice`, `learning/consent`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createMemoryBridge, newBridgeState, resultText, type BridgeState, type SidecarLike } from "../src/bridge.ts";
import { COMMANDS, TOOLS } from "../src/generated/tables.ts";
import type { Footer, InitializeParams } from "../src/protocol.ts";
import { MODEL_NO_AUTH, MODEL_NOT_FOUND } from "../src/model.ts";
import { RpcClosed, RpcError } from "../src/rpc.ts";
import type { SidecarEvents, SidecarState } from "../src/sidecar.ts";

type Handler = (...args: any[]) => any;
type Answer = (params: any) => unknown;

const footer = (state: Footer["state"], text: string, count?: number): Footer => ({ state, text, count });

class FakeSidecar implements SidecarLike {
	state: SidecarState = "idle";
	initResult = undefined;
	prestarted = 0;
	calls: { method: string; params: any }[] = [];
	events: SidecarEvents;
	init: () => InitializeParams;
	answers: Record<string, Answer>;
	constructor(init: () => InitializeParams, events: SidecarEvents, answers: Record<string, Answer>) {
		this.init = init;
		this.events = events;
		this.answers = answers;
	}
	get answering(): boolean {
		return this.state === "ready";
	}
	prestart(): void {
		this.prestarted += 1; // spawned, no handshake yet: the state stays idle
	}
	ensureStarted(): void {
		if (this.state === "idle") this.state = "starting";
	}
	async call<T>(method: string, params: unknown): Promise<T> {
		this.calls.push({ method, params });
		const answer = this.answers[method];
		if (!answer) throw new RpcClosed(`no answer for ${method}`);
		return (await answer(params)) as T;
	}
	stop(): void {
		this.state = "stopped";
	}
	killNow(): void {}
}

function fakePi() {
	const tools: any[] = [];
	const commands = new Map<string, any>();
	const handlers = new Map<string, Handler>();
	const pi = {
		registerTool: (t: any) => tools.push(t),
		registerCommand: (name: string, c: any) => commands.set(name, c),
		on: (event: string, h: Handler) => handlers.set(event, h),
	};
	return { pi: pi as any, tools, commands, handlers };
}

function fakeCtx(answers: { select?: string[]; model?: object; auth?: boolean; complete?: () => Promise<unknown> } = {}) {
	const statuses: string[] = [];
	const notes: string[] = [];
	const selects: { title: string; options: string[] }[] = [];
	let reloads = 0;
	const ctx = {
		cwd: "/tmp",
		mode: "rpc",
		hasUI: true,
		isProjectTrusted: () => false,
		ui: {
			setStatus: (_key: string, text: string) => statuses.push(text),
			notify: (message: string) => notes.push(message),
			select: async (title: string, options: string[]) => {
				selects.push({ title, options });
				return answers.select?.shift();
			},
			input: async () => undefined,
			editor: async () => undefined,
		},
		model: answers.model,
		modelRegistry: {
			find: () => undefined,
			hasConfiguredAuth: () => answers.auth ?? true,
			complete:
				answers.complete ??
				(async () => ({ content: [{ type: "text", text: "{\"memories\": []}" }], stopReason: "stop", usage: { input: 7, output: 3 } })),
		},
		sessionManager: {
			getSessionId: () => "s1",
			getSessionFile: () => undefined,
			getEntries: () => [],
			getLeafId: () => null,
			getBranch: () => [],
		},
		reload: async () => {
			reloads += 1;
		},
	};
	return { ctx: ctx as any, statuses, notes, selects, reloads: () => reloads };
}

function bridge(answers: Record<string, Answer>, state: BridgeState = newBridgeState()) {
	const made: FakeSidecar[] = [];
	const marks: (string | undefined)[] = [];
	const pi = fakePi();
	createMemoryBridge(pi.pi, {
		state,
		agentDir: () => "/agent",
		markCaptureSince: (dir) => marks.push(dir),
		newSidecar: (init, events) => {
			const sc = new FakeSidecar(init, events, answers);
			made.push(sc);
			return sc;
		},
		makeText: (text) => ({ text, render: () => [text], invalidate() {} }) as any,
	});
	return { ...pi, made, state, marks };
}

test("every tool and command of the sidecar's table is registered at once, before any handshake", () => {
	const b = bridge({});
	assert.deepEqual(b.tools.map((t) => t.name), TOOLS.map((t) => t.name));
	assert.deepEqual([...b.commands.keys()], COMMANDS.map((c) => c.name));
	for (const name of ["tdai-memory", "tdai-memory-pause", "tdai-memory-resume", "tdai-memory-ui", "tdai-memory-import", "tdai-memory-undo", "tdai-memory-learning"]) {
		assert.ok(b.commands.has(name), name);
	}
	const save = b.tools.find((t) => t.name === "tdai_memory_save");
	assert.deepEqual(save.parameters.properties.type.enum, ["fact", "preference", "constraint", "event", "instruction", "decision", "pitfall"]);
	// the process is spawned early so its start-up overlaps Pi's; the handshake waits for a session
	assert.equal(b.made.length, 1);
	assert.equal(b.made[0]!.prestarted, 1);
	assert.equal(b.made[0]!.state, "idle");
	assert.deepEqual(b.made[0]!.calls, []);
});

test("the footer over a turn, and again after a replacement runtime (/new)", async () => {
	const answers: Record<string, Answer> = {
		"session/start": () => ({ memorySessionId: "m", branch: "main" }),
		recall: () => ({ block: "<recalled_memory>x</recalled_memory>", footer: footer("recalled", "memory: recalled 2", 2) }),
		"turn/settled": () => ({ captured: 1, skipped: 0, footer: footer("recalled", "memory: recalled 2", 2) }),
	};
	const b = bridge(answers);
	const one = fakeCtx();
	b.handlers.get("session_start")!({ reason: "startup" }, one.ctx);
	assert.deepEqual(one.statuses, ["memory: starting"]);
	assert.deepEqual(b.marks, ["/agent"]); // when memory first ran, before any turn (catch-up reads it)
	b.made[0]!.state = "ready";
	b.made[0]!.events.onStatus(footer("ready", "memory: ready"));
	const out = await b.handlers.get("before_agent_start")!({ prompt: "how do we deploy?", systemPrompt: "SYS" }, one.ctx);
	assert.equal(out.systemPrompt, "SYS\n\n<recalled_memory>x</recalled_memory>");
	b.handlers.get("agent_end")!({ messages: [{ role: "user" }] }, one.ctx);
	b.handlers.get("agent_settled")!({ aborted: false }, one.ctx);
	await Promise.allSettled([...b.state.captures]);
	// the background delivery finished: the sidecar says so with a typed state
	b.made[0]!.events.onNotification("status/changed", { footer: footer("ready", "memory: ready") });
	b.made[0]!.events.onNotification("status/changed", { text: "memory: not a footer" }); // ignored
	assert.deepEqual(one.statuses, ["memory: starting", "memory: ready", "memory: recalled 2", "memory: recalled 2", "memory: ready"]);
	const settled = b.made[0]!.calls.find((c) => c.method === "turn/settled")!;
	assert.equal(settled.params.piSessionId, "s1");
	assert.equal(settled.params.sessionPersisted, false); // the fake session has no file: a --no-session run
	assert.ok(!("sessionFile" in settled.params) && !("reason" in settled.params));

	// /new: Pi runs the factory again with a fresh ctx; the warm sidecar's footer comes back
	await b.handlers.get("session_shutdown")!({ reason: "new" });
	const again = bridge(answers, b.state);
	const two = fakeCtx();
	again.handlers.get("session_start")!({ reason: "new" }, two.ctx);
	assert.deepEqual(two.statuses, ["memory: ready"]);
	assert.equal(again.made.length, 0); // the same sidecar serves the new runtime
	assert.equal(b.made[0]!.prestarted, 2); // a no-op on the warm one
	clearTimeout(b.state.stopTimer);
});

test("a command's dialog goes to Pi and its done step's reload flag reloads Pi", async () => {
	const answers: Record<string, Answer> = {
		"command/run": () => ({ kind: "select", flowId: "f1", title: "Delete 2?", message: "the list", options: ["No", "Yes"], placeholder: "", level: "info" }),
		"command/answer": (p) => ({ kind: "done", title: "", message: `answered ${p.answer}`, options: [], placeholder: "", level: "info", reload: p.answer === "Yes", footer: footer("ready", "memory: ready") }),
	};
	for (const [picked, reloads] of [["Yes", 1], ["No", 0]] as const) {
		const b = bridge(answers);
		const c = fakeCtx({ select: [picked] });
		await b.commands.get("tdai-memory-sync-skills").handler("", c.ctx);
		assert.deepEqual(c.selects, [{ title: "Delete 2?", options: ["No", "Yes"] }]);
		assert.deepEqual(c.notes, ["the list", `answered ${picked}`]);
		assert.equal(c.reloads(), reloads);
		assert.deepEqual(c.statuses, ["memory: ready"]);
		assert.equal(b.made[0]!.calls[0]!.params.name, "sync-skills");
	}
});

test("a sidecar that is not there: the footer says unavailable and a tool fails for the model", async () => {
	const b = bridge({});
	const c = fakeCtx();
	const save = b.tools.find((t) => t.name === "tdai_memory_save");
	await assert.rejects(save.execute("id", { content: "x" }, undefined, undefined, c.ctx), /Memory unavailable/);
	const out = await b.handlers.get("before_agent_start")!({ prompt: "hi", systemPrompt: "SYS" }, c.ctx);
	assert.equal(out, undefined);
	assert.match(c.statuses.at(-1) ?? "", /^memory: unavailable \(no answer for recall\)$/);
});

test("a tool result is drawn as its readable text, a few lines until expanded", () => {
	const b = bridge({});
	const search = b.tools.find((t) => t.name === "tdai_memory_search");
	const result = { content: [{ type: "text", text: "<recalled_memory ...>wrapped</recalled_memory>" }], details: { display: "- [preference] likes <tabs>" } };
	assert.equal(search.renderResult(result, { expanded: false, isPartial: false }).text, "- [preference] likes <tabs>");
	const long = { content: [], details: { display: Array.from({ length: 12 }, (_, i) => `line ${i}`).join("\n") } };
	const collapsed = resultText(long, false).split("\n");
	assert.equal(collapsed.length, 9);
	assert.equal(collapsed.at(-1), "… 4 more lines (expand to see)");
	assert.equal(resultText(long, true).split("\n").length, 12);
});

const completeParams = { systemPrompt: "sys", prompt: "what was learned?", maxTokens: 200, timeoutMs: 5000 };

test("model/complete from the sidecar runs on the session's model and answers with its text", async () => {
	const b = bridge({ "session/start": () => ({ memorySessionId: "m", branch: "main" }) });
	const c = fakeCtx({ model: { provider: "fake", id: "fake-model" } });
	b.handlers.get("session_start")!({ reason: "startup" }, c.ctx);
	const answer = await b.made[0]!.events.onRequest!("model/complete", completeParams);
	assert.deepEqual(answer, { text: '{"memories": []}', stopReason: "stop", usage: { input: 7, output: 3 }, model: "fake/fake-model" });
});

test("model/complete fails with a typed error: provider error, no model, no auth, no session", async () => {
	const b = bridge({ "session/start": () => ({ memorySessionId: "m", branch: "main" }) });
	const request = () => b.made[0]!.events.onRequest!("model/complete", completeParams);
	const code = (c: number) => (e: unknown) => e instanceof RpcError && e.code === c;
	await assert.rejects(request(), code(MODEL_NOT_FOUND)); // no Pi session yet
	const failing = fakeCtx({ model: { provider: "fake", id: "m" }, complete: async () => { throw new Error("HTTP 500"); } });
	b.handlers.get("session_start")!({ reason: "startup" }, failing.ctx);
	await assert.rejects(request(), (e: unknown) => e instanceof RpcError && /HTTP 500/.test(e.message));
	b.handlers.get("session_start")!({ reason: "startup" }, fakeCtx().ctx); // no model selected
	await assert.rejects(request(), code(MODEL_NOT_FOUND));
	b.handlers.get("session_start")!({ reason: "startup" }, fakeCtx({ model: { provider: "fake", id: "m" }, auth: false }).ctx);
	await assert.rejects(request(), code(MODEL_NO_AUTH));
	await assert.rejects(b.made[0]!.events.onRequest!("fs/read", {}), code(-32601)); // nothing else is served
});

test("a notice is shown to the user; the consent question runs the learning command once asked", async () => {
	const ran: any[] = [];
	const b = bridge({
		"session/start": () => ({ memorySessionId: "m", branch: "main" }),
		"command/run": (p) => {
			ran.push(p);
			return { kind: "select", flowId: "f1", title: "Let Pi learn from your sessions?", message: "what is sent where", options: ["No", "Yes"], placeholder: "", level: "info" };
		},
		"command/answer": (p) => ({ kind: "done", title: "", message: `learning is ${p.answer === "Yes" ? "on" : "off"}`, options: [], placeholder: "", level: "info", footer: footer("ready", "memory: ready") }),
	});
	const c = fakeCtx({ select: ["Yes"], model: { provider: "fake", id: "fake-model" } });
	b.handlers.get("session_start")!({ reason: "startup" }, c.ctx);
	b.made[0]!.events.onNotification("notice", { message: "memory: +1 learned from 2 turn(s)", level: "info" });
	b.made[0]!.events.onNotification("notice", { level: "info" }); // no message: nothing shown
	assert.deepEqual(c.notes, ["memory: +1 learned from 2 turn(s)"]);
	b.made[0]!.events.onNotification("learning/consent", {});
	await new Promise((r) => setTimeout(r, 20));
	assert.deepEqual(ran.map((p) => [p.name, p.args]), [["learning", "ask fake/fake-model"]]);
	assert.deepEqual(c.selects, [{ title: "Let Pi learn from your sessions?", options: ["No", "Yes"] }]);
	assert.deepEqual(c.notes.slice(1), ["what is sent where", "learning is on"]);
	// print mode has nobody to ask: the question is not run there
	const headless = fakeCtx();
	headless.ctx.hasUI = false;
	b.handlers.get("session_start")!({ reason: "startup" }, headless.ctx);
	b.made[0]!.events.onNotification("learning/consent", {});
	b.made[0]!.events.onNotification("notice", { message: "x" });
	await new Promise((r) => setTimeout(r, 20));
	assert.equal(ran.length, 1);
	assert.deepEqual(headless.notes, []);
});

test("a command whose session was replaced before the sidecar answered drops its message instead of throwing", async () => {
	let answer: (step: unknown) => void = () => {};
	const b = bridge({ "command/run": () => new Promise((r) => (answer = r)) });
	const c = fakeCtx({ model: { provider: "fake", id: "m" } });
	b.handlers.get("session_start")!({ reason: "startup" }, c.ctx);
	b.made[0]!.events.onNotification("learning/consent", {}); // runs the question in the background
	await new Promise((r) => setTimeout(r, 10));
	const stale = () => {
		throw new Error("This extension ctx is stale after session replacement or reload.");
	};
	Object.defineProperty(c.ctx, "hasUI", { get: stale }); // what Pi does to a replaced session's ctx
	c.ctx.ui.notify = stale;
	const failures: unknown[] = [];
	const onRejection = (e: unknown) => failures.push(e);
	process.on("unhandledRejection", onRejection);
	try {
		answer({ kind: "done", title: "", message: "learning is off", options: [], placeholder: "", level: "info", footer: footer("ready", "memory: ready") });
		await new Promise((r) => setTimeout(r, 20));
	} finally {
		process.off("unhandledRejection", onRejection);
	}
	assert.deepEqual(failures, []);
	assert.deepEqual(c.notes, []);
});

test("Pi about to compact asks the sidecar to learn, without waiting for it", () => {
	const b = bridge({ "learning/trigger": () => new Promise(() => {}) }); // never answers
	const c = fakeCtx();
	assert.equal(b.handlers.get("session_before_compact")!({}, c.ctx), undefined);
	assert.deepEqual(b.made[0]!.calls.map((x) => [x.method, x.params]), [["learning/trigger", { piSessionId: "s1", reason: "compact" }]]);
});

test("an editor step gets Pi's editor with the text to start from", async () => {
	const edited: string[] = [];
	const b = bridge({
		"command/run": () => ({ kind: "editor", flowId: "f1", title: "Edit L1:a1", message: "", options: [], placeholder: "", prefill: "likes tabs", level: "info" }),
		"command/answer": (p) => ({ kind: "done", title: "", message: `got ${p.answer}`, options: [], placeholder: "", level: "info", footer: footer("ready", "memory: ready") }),
	});
	const c = fakeCtx();
	c.ctx.ui.editor = async (title: string, prefill: string) => (edited.push(`${title}|${prefill}`), "likes spaces");
	await b.commands.get("tdai-memory").handler("", c.ctx);
	assert.deepEqual(edited, ["Edit L1:a1|likes tabs"]);
	assert.deepEqual(c.notes, ["got likes spaces"]);
});
