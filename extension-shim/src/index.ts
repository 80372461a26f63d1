import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { getAgentDir } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";
import { createMemoryBridge, newBridgeState } from "./bridge.ts";

/** One per Pi process: Pi re-runs the factory below on fork/new/resume/reload, the sidecar stays. */
const state = newBridgeState();

/** Pi's entry point: Pi's own packages are imported here only, so bridge.ts runs in tests too. */
export default function (pi: ExtensionAPI): void {
	createMemoryBridge(pi, {
		state,
		agentDir: getAgentDir,
		makeText: (text) => new Text(text, 0, 0),
		timingsFile: process.env.PI_MEMORY_BRIDGE_TIMINGS,
	});
}
