import { test } from "node:test";
import assert from "node:assert/strict";
import { liveUserTimestamps, projectEntries } from "../src/entries.ts";

const entries = [
	{ type: "model_change", id: "a1", parentId: null, timestamp: "2026-01-01T00:00:00Z" },
	{ type: "message", id: "b2", parentId: "a1", message: { role: "user", content: "secret text", timestamp: 111 } },
	{ type: "message", id: "c3", parentId: "b2", message: { role: "assistant", content: [], timestamp: 222 } },
	{ type: "label", id: "d4", parentId: "c3", targetId: "b2" },
	{ nonsense: true },
	null,
];

test("projection keeps ids, links, types and timestamps but never content", () => {
	const refs = projectEntries(entries);
	assert.deepEqual(refs, [
		{ id: "a1", parentId: null, type: "model_change" },
		{ id: "b2", parentId: "a1", type: "message", ts: 111 },
		{ id: "c3", parentId: "b2", type: "message", ts: 222 },
		{ id: "d4", parentId: "c3", type: "label" },
	]);
	assert.ok(!JSON.stringify(refs).includes("secret"));
});

test("live user timestamps come from user messages only", () => {
	assert.deepEqual(liveUserTimestamps(entries), [111]);
});
