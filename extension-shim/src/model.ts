/**
 * `model/complete` (sidecar -> shim): one completion on the user's model for consolidation, run
 * through Pi's own model registry (its auth, OAuth and custom providers) and outside the session:
 * nothing is added to the transcript and no agent hook fires. The sidecar decides what to ask;
 * this only resolves the model, checks it has auth, runs the call under a deadline and returns
 * the text blocks, the usage and the stop reason, for the sidecar to validate.
 */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { ModelCompleteParams, ModelCompleteResult, SessionModel } from "./protocol.ts";
import { RpcError } from "./rpc.ts";

// JSON-RPC error codes of `model/complete` (pi_memory_bridge/protocol.py names them MODEL_*)
export const MODEL_NOT_FOUND = -32010;
export const MODEL_NO_AUTH = -32011;
export const MODEL_FAILED = -32012;
export const MODEL_TIMEOUT = -32013;
const INVALID_PARAMS = -32602;

function parseParams(raw: unknown): ModelCompleteParams {
	const p = (raw ?? {}) as Partial<Record<keyof ModelCompleteParams, unknown>>;
	const ok =
		typeof p.systemPrompt === "string" &&
		typeof p.prompt === "string" &&
		typeof p.maxTokens === "number" &&
		Number.isInteger(p.maxTokens) &&
		p.maxTokens > 0 &&
		typeof p.timeoutMs === "number" &&
		p.timeoutMs > 0 &&
		(p.model === undefined || p.model === null || typeof p.model === "string");
	if (!ok) throw new RpcError(INVALID_PARAMS, "model/complete: systemPrompt, prompt, maxTokens and timeoutMs are required");
	return p as ModelCompleteParams;
}

type Model = NonNullable<ExtensionContext["model"]>;

function resolveModel(ctx: ExtensionContext, wanted: string | null | undefined): Model {
	if (wanted) {
		const slash = wanted.indexOf("/");
		const found = slash > 0 ? ctx.modelRegistry.find(wanted.slice(0, slash), wanted.slice(slash + 1)) : undefined;
		if (!found) throw new RpcError(MODEL_NOT_FOUND, `Pi knows no model "${wanted}" (learning.model wants "provider/id")`);
		return found;
	}
	if (!ctx.model) throw new RpcError(MODEL_NOT_FOUND, "the session has no model selected");
	return ctx.model;
}

export async function completeOnModel(ctx: ExtensionContext | undefined, raw: unknown): Promise<ModelCompleteResult> {
	const p = parseParams(raw);
	if (!ctx) throw new RpcError(MODEL_NOT_FOUND, "no Pi session to run the model in");
	let model: Model;
	let registry: ExtensionContext["modelRegistry"];
	try {
		registry = ctx.modelRegistry;
		model = resolveModel(ctx, p.model);
	} catch (e) {
		if (e instanceof RpcError) throw e;
		throw new RpcError(MODEL_NOT_FOUND, `the Pi session is gone: ${(e as Error).message}`); // a stale ctx
	}
	const name = `${model.provider}/${model.id}`;
	if (!registry.hasConfiguredAuth(model)) throw new RpcError(MODEL_NO_AUTH, `${name} has no configured auth`);
	let message: Awaited<ReturnType<typeof registry.complete>>;
	const signal = AbortSignal.timeout(p.timeoutMs);
	const timedOut = (): RpcError => new RpcError(MODEL_TIMEOUT, `${name}: no answer within ${p.timeoutMs} ms`);
	try {
		message = await registry.complete(
			model,
			{
				systemPrompt: p.systemPrompt,
				messages: [{ role: "user", content: [{ type: "text", text: p.prompt }], timestamp: Date.now() }],
			},
			{ signal, maxTokens: p.maxTokens },
		);
	} catch (e) {
		if (signal.aborted) throw timedOut();
		throw new RpcError(MODEL_FAILED, `${name}: ${(e instanceof Error ? e.message : String(e)).slice(0, 300)}`);
	}
	if (signal.aborted) throw timedOut(); // some providers resolve with stopReason "aborted"
	const text = message.content
		.map((block) => (block.type === "text" && typeof block.text === "string" ? block.text : ""))
		.join("");
	return {
		text,
		stopReason: String(message.stopReason),
		usage: { input: Math.max(0, message.usage?.input ?? 0), output: Math.max(0, message.usage?.output ?? 0) },
		model: name,
	};
}

/** The session's model for the consent question: names and Pi's catalog price; null when none is set. */
export function sessionModelOf(ctx: ExtensionContext): SessionModel | null {
	let m: ExtensionContext["model"];
	try {
		m = ctx.model;
	} catch {
		return null; // a stale ctx: the question then names no model rather than failing
	}
	if (!m) return null;
	const rate = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);
	return { provider: m.provider, id: m.id, inputCostPerMtok: rate(m.cost?.input), outputCostPerMtok: rate(m.cost?.output) };
}
