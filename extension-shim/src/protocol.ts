/** Wire types of the shim <-> sidecar protocol (the Python side documents every method: pi_memory_bridge/protocol.py). */
export const PROTOCOL_VERSION = "1.0";
export const CLIENT_NAME = "pi-memory-bridge-shim";
export const CLIENT_VERSION = "0.1.0";

export interface InitializeParams {
	protocolVersion: string;
	client: { name: string; version: string };
	piVersion?: string;
	agentDir?: string;
	cwd: string;
	projectTrusted: boolean;
	mode: string;
	hasUi: boolean;
}

export interface InitializeResult {
	protocolVersion: string;
	serverVersion: string;
	config: { ok: boolean; backend: string; enabled: boolean; problems: string[]; sources: string[] };
	recall: { deadlineMs: number; enabled: boolean };
	statusText: string;
}

export interface EntryRef {
	id: string;
	parentId: string | null;
	type: string;
	role?: string;
	ts?: number;
}

export interface SessionResult {
	memorySessionId: string;
	branch: string;
}

export interface RecallResult {
	block: string | null;
	outcome: string;
	elapsedMs: number;
	chars: number;
	statusText: string;
}

export interface TurnSettledParams {
	piSessionId: string;
	runs: unknown[][];
	aborted: boolean | null;
	entries: EntryRef[];
	leafId: string | null;
	/** False for a run Pi does not keep (`--no-session`): it gets recall, and capture only if configured. */
	sessionPersisted: boolean;
}

export interface TurnSettledResult {
	captured: number;
	skipped: number;
	statusText: string;
}

export interface ToolCallResult {
	text: string;
	details: Record<string, unknown>;
	isError: boolean;
}

export interface CommandStep {
	kind: "done" | "confirm" | "select" | "input" | "editor";
	flowId?: string | null;
	title: string;
	message: string;
	options: string[];
	placeholder: string;
	prefill?: string;
	level: "info" | "warning" | "error";
	statusText?: string | null;
}

/** sidecar -> shim request: one completion on the user's model (learning). */
export interface ModelCompleteParams {
	systemPrompt: string;
	prompt: string;
	maxTokens: number;
	timeoutMs: number;
	model?: string | null; // "provider/id"; absent: the session's model
}

export interface ModelCompleteResult {
	text: string;
	stopReason: string;
	usage: { input: number; output: number };
	model: string;
}

export interface Notice {
	message: string;
	level: "info" | "warning" | "error";
}
