/**
 * When memory first ran in this agent dir: `<agent-dir>/memory-bridge/capture-since` (epoch ms).
 * Written once, at the first session start, before any turn the sidecar could capture, even when
 * the sidecar itself never gets to start. Catch-up recovers turns from Pi's session files said
 * from then on; older sessions are imported only when the user asks. A few µs, once per process.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const SINCE_FILE = "capture-since";
let marked = false;

export function markCaptureSince(agentDir: string | undefined, now: () => number = Date.now): void {
	if (marked || !agentDir) return;
	marked = true;
	try {
		const dir = join(agentDir, "memory-bridge");
		mkdirSync(dir, { recursive: true, mode: 0o700 });
		writeFileSync(join(dir, SINCE_FILE), `${now()}\n`, { flag: "wx", mode: 0o600 });
	} catch {
		/* already recorded (the usual case), or not writable: the sidecar records it then */
	}
}

/** Tests only: forget that this process already marked. */
export function resetSinceMark(): void {
	marked = false;
}
