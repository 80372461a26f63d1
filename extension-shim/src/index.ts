import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { createMemoryBridge } from "./bridge.ts";

export default function (pi: ExtensionAPI): void {
	createMemoryBridge(pi);
}
