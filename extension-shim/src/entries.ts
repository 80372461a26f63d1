/** Projections of Pi session entries that the sidecar needs (ids and links, never content). */
import type { EntryRef } from "./protocol.ts";

type AnyEntry = { id?: unknown; parentId?: unknown; type?: unknown; message?: { role?: unknown; timestamp?: unknown } };

export function projectEntries(entries: readonly unknown[]): EntryRef[] {
	const out: EntryRef[] = [];
	for (const raw of entries) {
		const e = raw as AnyEntry;
		if (!e || typeof e.id !== "string") continue;
		const ref: EntryRef = {
			id: e.id,
			parentId: typeof e.parentId === "string" ? e.parentId : null,
			type: typeof e.type === "string" ? e.type : "",
		};
		if (e.type === "message" && e.message) {
			// the role and time let capture key a user turn by its entry id (catch-up finds it again)
			if (typeof e.message.role === "string") ref.role = e.message.role;
			if (typeof e.message.timestamp === "number" && Number.isInteger(e.message.timestamp)) ref.ts = e.message.timestamp;
		}
		out.push(ref);
	}
	return out;
}

/** Timestamps of the user messages on the active branch: those turns are already in the model's context. */
export function liveUserTimestamps(branch: readonly unknown[]): number[] {
	const out: number[] = [];
	for (const raw of branch) {
		const e = raw as AnyEntry;
		if (e?.type === "message" && e.message?.role === "user" && typeof e.message.timestamp === "number") {
			out.push(e.message.timestamp);
		}
	}
	return out;
}
