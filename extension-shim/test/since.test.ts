import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync, mkdirSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { markCaptureSince, resetSinceMark, SINCE_FILE } from "../src/since.ts";

test("the first session start records when capture started, private, and never moves it", () => {
	const agentDir = mkdtempSync(join(tmpdir(), "since-"));
	resetSinceMark();
	markCaptureSince(agentDir, () => 1_800_000_000_123);
	const file = join(agentDir, "memory-bridge", SINCE_FILE);
	assert.equal(readFileSync(file, "utf8"), "1800000000123\n");
	assert.equal(statSync(file).mode & 0o777, 0o600);
	assert.equal(statSync(join(agentDir, "memory-bridge")).mode & 0o777, 0o700);
	resetSinceMark();
	markCaptureSince(agentDir, () => 1_900_000_000_000);
	assert.equal(readFileSync(file, "utf8"), "1800000000123\n");
});

test("an unwritable data dir or no agent dir never throws", () => {
	resetSinceMark();
	markCaptureSince(undefined);
	const agentDir = mkdtempSync(join(tmpdir(), "since-ro-"));
	mkdirSync(join(agentDir, "memory-bridge"));
	writeFileSync(join(agentDir, "memory-bridge", "x"), "");
	chmodSync(join(agentDir, "memory-bridge"), 0o500);
	resetSinceMark();
	assert.doesNotThrow(() => markCaptureSince(agentDir));
	chmodSync(join(agentDir, "memory-bridge"), 0o700);
});
