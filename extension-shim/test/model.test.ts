import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { completeOnModel, MODEL_FAILED, MODEL_NO_AUTH, MODEL_NOT_FOUND, MODEL_TIMEOUT, sessionModelOf } from "../src/model.ts";
import { RpcError } from "../src/rpc.ts";

const params = { systemPrompt: "sys", prompt: "hi", maxTokens: 100, timeoutMs: 5000 };
const fake = { provider: "fake", id: "fake-model" };

// Only the part of Pi's context that model/complete touches; the E2E runs it against real Pi.
function ctx(opts: { model?: object; auth?: boolean; complete?: (...a: unknown[]) => Promise<unknown> }): ExtensionContext {
	return {
		model: opts.model,
		modelRegistry: {
			find: (p: string, id: string) => (p === "fake" && id === "other" ? { provider: p, id } : undefined),
			hasConfiguredAuth: () => opts.auth ?? true,
			complete:
				opts.complete ??
				(async () => ({ content: [{ type: "thinking", thinking: "hm" }, { type: "text", text: "{}" }], stopReason: "stop", usage: { input: 5, output: 2 } })),
		},
	} as unknown as ExtensionContext;
}

const code = (c: number) => (e: unknown) => e instanceof RpcError && e.code === c;

test("runs on the session's model, returns only text blocks, usage and stop reason", async () => {
	const seen: unknown[][] = [];
	const c = ctx({ model: fake, complete: async (...a) => (seen.push(a), { content: [{ type: "text", text: "ok" }], stopReason: "length", usage: { input: 3, output: 9 } }) });
	const r = await completeOnModel(c, params);
	assert.deepEqual(r, { text: "ok", stopReason: "length", usage: { input: 3, output: 9 }, model: "fake/fake-model" });
	const [model, context, options] = seen[0] as [unknown, { systemPrompt: string; messages: { role: string }[] }, { maxTokens: number; signal: AbortSignal }];
	assert.equal(model, fake);
	assert.equal(context.systemPrompt, "sys");
	assert.deepEqual(context.messages.map((m) => m.role), ["user"]);
	assert.equal(options.maxTokens, 100);
	assert.ok(options.signal instanceof AbortSignal);
	assert.equal((await completeOnModel(ctx({ model: fake }), params)).text, "{}");
});

test("a configured provider/id is looked up; unknown models, missing auth and failures are typed errors", async () => {
	assert.equal((await completeOnModel(ctx({}), { ...params, model: "fake/other" })).model, "fake/other");
	await assert.rejects(completeOnModel(ctx({ model: fake }), { ...params, model: "nope/x" }), code(MODEL_NOT_FOUND));
	await assert.rejects(completeOnModel(ctx({}), params), code(MODEL_NOT_FOUND));
	await assert.rejects(completeOnModel(undefined, params), code(MODEL_NOT_FOUND));
	await assert.rejects(completeOnModel(ctx({ model: fake, auth: false }), params), code(MODEL_NO_AUTH));
	const boom = ctx({ model: fake, complete: async () => { throw new Error("HTTP 500"); } });
	await assert.rejects(completeOnModel(boom, params), code(MODEL_FAILED));
	await assert.rejects(completeOnModel(ctx({ model: fake }), { prompt: "x" }), code(-32602));
});

test("a call past its deadline is a timeout, whether the provider throws or resolves aborted", async () => {
	const slow = (throws: boolean) =>
		ctx({
			model: fake,
			complete: (_m, _c, o) =>
				new Promise((resolve, reject) => {
					(o as { signal: AbortSignal }).signal.addEventListener("abort", () =>
						throws ? reject(new Error("aborted")) : resolve({ content: [], stopReason: "aborted", usage: { input: 0, output: 0 } }),
					);
				}),
		});
	const keepAlive = setTimeout(() => {}, 1000); // AbortSignal.timeout's timer does not hold the loop open
	await assert.rejects(completeOnModel(slow(true), { ...params, timeoutMs: 30 }), code(MODEL_TIMEOUT));
	await assert.rejects(completeOnModel(slow(false), { ...params, timeoutMs: 30 }), code(MODEL_TIMEOUT));
	clearTimeout(keepAlive);
});

test("the session's model for the consent question: names and catalog price, none without a model", () => {
	const priced = ctx({ model: { ...fake, cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } } });
	assert.deepEqual(sessionModelOf(priced), { provider: "fake", id: "fake-model", inputCostPerMtok: 3, outputCostPerMtok: 15 });
	const unpriced = ctx({ model: { ...fake, cost: { input: Number.NaN, output: -1 } } });
	assert.deepEqual(sessionModelOf(unpriced), { provider: "fake", id: "fake-model", inputCostPerMtok: 0, outputCostPerMtok: 0 });
	assert.equal(sessionModelOf(ctx({})), null);
	const stale = {
		get model(): never {
			throw new Error("stale");
		},
	} as unknown as ExtensionContext;
	assert.equal(sessionModelOf(stale), null);
});
