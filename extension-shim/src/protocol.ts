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
	kind: "done" | "confirm" | "select" | "input";
	flowId?: string | null;
	title: string;
	message: string;
	options: string[];
	placeholder: string;
	level: "info" | "warning" | "error";
	statusText?: string | null;
}

/** One `tdai_*` tool as the sidecar defines it (src/generated/tables.ts holds every row). */
export interface ToolRow {
	name: string;
	label: string;
	description: string;
	promptSnippet: string;
	/** JSON Schema of the arguments, the same the sidecar validates with. */
	parameters: Record<string, unknown>;
}

/** One `/tdai-memory*` command: the Pi name, the name `command/run` carries, the description. */
export interface CommandRow {
	name: string;
	command: string;
	description: string;
}
