import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";
import { createMemoryBridge } from "./bridge.ts";

/** Pi's entry point: Pi's own packages are imported here only, so bridge.ts runs in tests too. */
export default function (pi: ExtensionAPI): void {
	createMemoryBridge(pi, { makeText: (text) => new Text(text, 0, 0) });
}
