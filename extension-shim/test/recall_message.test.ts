/** The recalled block as a kept message: what the branch holds, the order the model reads, the TUI line. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RECALL_MESSAGE_TYPE, recallBeforePrompt, recalledInContext, recallMessage, recallSummary } from "../src/recall_message.ts";

const recall = (content: string) => ({ role: "custom", customType: RECALL_MESSAGE_TYPE, content });
const user = (content: string) => ({ role: "user", content });
const assistant = (content: string) => ({ role: "assistant", content });

test("a block becomes a displayed message carrying its keys; no block, no message", () => {
	const footer = { state: "ready" as const, text: "memory: ready" };
	assert.equal(recallMessage({ block: null, outcome: "empty", elapsedMs: 1, chars: 0, footer }), undefined);
	const m = recallMessage({ block: "B", outcome: "recalled", elapsedMs: 1, chars: 1, keys: ["a"], footer });
	assert.deepEqual(m, { customType: RECALL_MESSAGE_TYPE, content: "B", display: true, details: { keys: ["a"] } });
});

test("only this extension's custom messages count, whatever shape their details have", () => {
	const got = recalledInContext([
		{ type: "custom_message", customType: RECALL_MESSAGE_TYPE, content: "abc", details: { keys: ["k1", 7, "k2"] } },
		{ type: "custom_message", customType: RECALL_MESSAGE_TYPE, content: "de", details: null },
		{ type: "custom", customType: RECALL_MESSAGE_TYPE, data: { keys: ["not-a-message"] } },
		{ type: "custom_message", customType: "other", content: "xyz", details: { keys: ["k9"] } },
		null,
	]);
	assert.deepEqual(got, { keys: ["k1", "k2"], chars: 5 });
});

test("each block moves before its own prompt, and the same history always comes out the same", () => {
	const history = [user("p1"), recall("b1"), assistant("a1"), user("p2"), { role: "custom", customType: "x", content: "o" }, recall("b2")];
	const once = recallBeforePrompt(history)!;
	assert.deepEqual(once.map((m) => m.content), ["b1", "p1", "a1", "b2", "p2", "o"]);
	// the next request repeats this one from the first byte
	const next = recallBeforePrompt([...history, assistant("a2"), user("p3"), recall("b3")])!;
	assert.deepEqual(next.slice(0, once.length), once);
	assert.deepEqual(next.slice(once.length).map((m) => m.content), ["a2", "b3", "p3"]);
	assert.deepEqual(history.map((m) => m.content), ["p1", "b1", "a1", "p2", "o", "b2"]); // input untouched
});

test("nothing to move: undefined, and a block with no prompt before it stays", () => {
	assert.equal(recallBeforePrompt([user("p"), assistant("a")]), undefined);
	assert.equal(recallBeforePrompt([recall("b"), user("p")]), undefined);
	assert.equal(recallBeforePrompt([assistant("a"), recall("b")]), undefined);
});

test("the TUI line names how many items, until expanded", () => {
	assert.equal(recallSummary("abcd", { keys: ["k"] }, false), "memory: recalled 1 item (4 chars, expand to see)");
	assert.equal(recallSummary("abcd", undefined, false), "memory: recalled 0 items (4 chars, expand to see)");
	assert.equal(recallSummary("abcd", { keys: ["k"] }, true), "abcd");
});
