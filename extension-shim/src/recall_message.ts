/**
 * How a recalled block travels: a custom message of its own type that Pi keeps in the session,
 * so every later request repeats it byte for byte and the provider's prompt cache keeps the whole
 * conversation (a block in the system prompt changed the very start of every request).
 *
 * What a branch already holds is read back from Pi's own context entries each time (after a
 * compaction only what the model still sees; /tree and /fork move with the branch), so the shim
 * keeps no state of its own about it.
 */
import type { RecallResult } from "./protocol.ts";

export const RECALL_MESSAGE_TYPE = "pi-memory-bridge-recall";

/** What the message carries beside the block: its items' context keys (digests from the sidecar). */
export interface RecallDetails {
	keys: string[];
}

export interface RecallMessage {
	customType: typeof RECALL_MESSAGE_TYPE;
	content: string;
	display: boolean;
	details: RecallDetails;
}

export function recallMessage(result: RecallResult): RecallMessage | undefined {
	if (!result.block) return undefined;
	return {
		customType: RECALL_MESSAGE_TYPE,
		content: result.block,
		display: true,
		details: { keys: [...(result.keys ?? [])] },
	};
}

/** The recalled blocks still in the model's context: their items' keys and their size. */
export interface InContext {
	keys: string[];
	chars: number;
}

type AnyEntry = { type?: unknown; customType?: unknown; content?: unknown; details?: unknown };

function contentChars(content: unknown): number {
	if (typeof content === "string") return content.length;
	if (!Array.isArray(content)) return 0;
	let n = 0;
	for (const part of content) {
		const text = (part as { text?: unknown } | null)?.text;
		if (typeof text === "string") n += text.length;
	}
	return n;
}

/** `entries`: Pi's context entries of the branch (`sessionManager.buildContextEntries()`). */
export function recalledInContext(entries: readonly unknown[]): InContext {
	const keys: string[] = [];
	let chars = 0;
	for (const raw of entries) {
		const e = raw as AnyEntry | null;
		if (e?.type !== "custom_message" || e.customType !== RECALL_MESSAGE_TYPE) continue;
		chars += contentChars(e.content);
		const found = (e.details as { keys?: unknown } | undefined)?.keys;
		if (Array.isArray(found)) for (const k of found) if (typeof k === "string") keys.push(k);
	}
	return { keys, chars };
}

type AnyMessage = { role?: unknown; customType?: unknown };

const isRecall = (m: unknown): boolean =>
	(m as AnyMessage | null)?.role === "custom" && (m as AnyMessage).customType === RECALL_MESSAGE_TYPE;

/**
 * Pi adds a `before_agent_start` message after the prompt; the model reads it before the prompt
 * instead, so the user's words come last and retrieved data never has the last word. The same
 * messages always come out in the same order, so each request still repeats the one before it.
 * Returns undefined when nothing moves.
 */
export function recallBeforePrompt<M>(messages: readonly M[]): M[] | undefined {
	let out: M[] | undefined;
	for (let i = 1; i < messages.length; i++) {
		if (!isRecall(messages[i])) continue;
		// the prompt is the nearest user message before it, past other extensions' custom messages
		let j = i - 1;
		while (j >= 0 && (messages[j] as AnyMessage | null)?.role === "custom" && !isRecall(messages[j])) j--;
		if (j < 0 || (messages[j] as AnyMessage | null)?.role !== "user") continue;
		out ??= [...messages];
		const [recall] = out.splice(i, 1);
		out.splice(j, 0, recall as M);
	}
	return out;
}

/** The line the TUI shows for a recalled block until the user expands it. */
export function recallSummary(content: unknown, details: unknown, expanded: boolean): string {
	const text = typeof content === "string" ? content : "";
	if (expanded) return text;
	const keys = (details as { keys?: unknown } | undefined)?.keys;
	const n = Array.isArray(keys) ? keys.length : 0;
	return `memory: recalled ${n} item${n === 1 ? "" : "s"} (${text.length} chars, expand to see)`;
}
