/**
 * The bridge with a fake Pi and a fake sidecar (the factory is injected): what Pi is given to
 * register, what the footer shows over a turn and across a replacement runtime, how a command's
 * dialog and its reload flag reach Pi, and how a tool result is drawn.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createMemoryBridge, newBridgeState, resultText, type BridgeState, type SidecarLike } from "../src/bridge.ts";
import { COMMANDS, TOOLS } from "../src/generated/tables.ts";
import type { Footer, InitializeParams } from "../src/protocol.ts";
import { RpcClosed } from "../src/rpc.ts";
import type { SidecarEvents, SidecarState } from "../src/sidecar.ts";

type Handler = (...args: any[]) => any;
type Answer = (params: any) => unknown;

const footer = (state: Footer["state"], text: string, count?: number): Footer => ({ state, text, count });

class FakeSidecar implements SidecarLike {
	state: SidecarState = "idle";
	initResult = undefined;
	calls: { method: string; params: any }[] = [];
	events: SidecarEvents;
	init: () => InitializeParams;
	answers: Record<string, Answer>;
	constructor(init: () => InitializeParams, events: SidecarEvents, answers: Record<string, Answer>) {
		this.init = init;
		this.events = events;
		this.answers = answers;
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
	async stop(): Promise<void> {
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

function fakeCtx(answers: { select?: string[] } = {}) {
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
	const pi = fakePi();
	createMemoryBridge(pi.pi, {
		state,
		newSidecar: (init, events) => {
			const sc = new FakeSidecar(init, events, answers);
			made.push(sc);
			return sc;
		},
		makeText: (text) => ({ text, render: () => [text], invalidate() {} }) as any,
	});
	return { ...pi, made, state };
}

test("every tool and command of the sidecar's table is registered at once, before any sidecar", () => {
	const b = bridge({});
	assert.deepEqual(b.tools.map((t) => t.name), TOOLS.map((t) => t.name));
	assert.deepEqual([...b.commands.keys()], COMMANDS.map((c) => c.name));
	const save = b.tools.find((t) => t.name === "tdai_memory_save");
	assert.deepEqual(save.parameters.properties.type.enum, ["fact", "preference", "constraint", "event", "instruction"]);
	assert.equal(b.made.length, 0); // registration does not start the sidecar
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
	assert.ok(!("sessionFile" in settled.params) && !("reason" in settled.params));

	// /new: Pi runs the factory again with a fresh ctx; the warm sidecar's footer comes back
	await b.handlers.get("session_shutdown")!({ reason: "new" });
	const again = bridge(answers, b.state);
	const two = fakeCtx();
	again.handlers.get("session_start")!({ reason: "new" }, two.ctx);
	assert.deepEqual(two.statuses, ["memory: ready"]);
	assert.equal(again.made.length, 0); // the same sidecar serves the new runtime
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
	assert.equal(collapsed.at(-1), "… 4 more line(s) (expand to see)");
	assert.equal(resultText(long, true).split("\n").length, 12);
});
