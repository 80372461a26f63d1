/** Wire types of the shim <-> sidecar protocol (the Python side documents every method: pi_memory_bridge/wire.py). */
import type { FOOTER_TEMPLATES } from "./generated/tables.ts";

export const PROTOCOL_VERSION = "1.0";
export const CLIENT_NAME = "pi-memory-bridge-shim";
export const CLIENT_VERSION = "0.1.0";

export interface InitializeParams {
	protocolVersion: string;
	client: { name: string; version: string };
	agentDir?: string;
	cwd: string;
	projectTrusted: boolean;
	hasUi: boolean;
}

/** A footer state the sidecar names (pi_memory_bridge/footer.py lists them). */
export type FooterStateName = keyof typeof FOOTER_TEMPLATES;

/** Pi's status line: the typed state and the text to show. The shim shows `text`, keeps the
 * state, and never reads meaning out of the text. */
export interface Footer {
	state: FooterStateName;
	count?: number | null;
	reason?: string | null;
	text: string;
}

export interface InitializeResult {
	protocolVersion: string;
	serverVersion: string;
	config: { ok: boolean; backend: string; enabled: boolean; problems: string[]; sources: string[] };
	recall: { deadlineMs: number; enabled: boolean };
	footer: Footer;
	/** Tools whose feature the config turns off: taken out of Pi's active tools. */
	hiddenTools?: string[];
}

export interface EntryRef {
	id: string;
	parentId: string | null;
	type: string;
	/** The message's role, for message entries (capture keys a user turn by its entry id). */
	role?: string;
	/** The message's own timestamp (ms), for message entries. */
	ts?: number;
}

export interface SessionParams {
	piSessionId: string;
	sessionFile?: string | null;
	entries: EntryRef[];
	leafId: string | null;
}

export interface SessionResult {
	memorySessionId: string;
	branch: string;
}

export interface RecallParams {
	piSessionId: string;
	prompt: string;
	liveUserTimestamps: number[];
	/** Context keys of the items recalled blocks still in this branch's context hold. */
	inContext: string[];
	/** Characters of those blocks (the sidecar keeps all of them within recall.branchMaxChars). */
	inContextChars: number;
}

export interface RecallResult {
	block: string | null;
	outcome: string;
	elapsedMs: number;
	chars: number;
	/** Context keys of the items in `block` (kept with it in Pi's session). */
	keys?: string[];
	footer: Footer;
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
	footer: Footer;
}

export interface ToolCallParams {
	name: string;
	arguments: Record<string, unknown>;
}

export interface ToolCallResult {
	text: string;
	details: Record<string, unknown>;
	isError: boolean;
}

/** The session's current model as Pi's registry describes it; prices in $ per million tokens. */
export interface SessionModel {
	provider: string;
	id: string;
	inputCostPerMtok: number;
	outputCostPerMtok: number;
}

export interface CommandRunParams {
	name: string;
	args: string;
	hasUi: boolean;
	piSessionId: string;
	sessionModel: SessionModel | null;
}

export interface CommandAnswerParams {
	flowId: string;
	answer: boolean | string | null;
}

export interface CommandStep {
	/** A yes/no question comes as a select with "No" first (Pi's confirm cannot start on No). */
	kind: "done" | "select" | "input" | "editor";
	flowId?: string | null;
	title: string;
	message: string;
	options: string[];
	placeholder: string;
	/** An editor step: the text to start from. */
	prefill?: string;
	level: "info" | "warning" | "error";
	/** On a done step: the status line after the command. */
	footer?: Footer | null;
	/** On a done step: reload Pi (it reads skills and configuration at start-up). */
	reload?: boolean;
}

export interface StatusChanged {
	footer: Footer;
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
	/** A long report: kept in Pi's transcript (not sent to the model) in the TUI, a notification elsewhere. */
	report: boolean;
}

export interface LearningTriggerParams {
	piSessionId: string;
	reason: "compact" | "idle" | "manual";
}

export interface LearningTriggerResult {
	scheduled: boolean;
	detail: string;
}

export interface ShutdownParams {
	reason: string;
}

export interface ShutdownResult {
	drained: boolean;
}

/** Every request the shim sends: its params and its result, so a call is typed end to end. */
export interface Requests {
	"session/start": { params: SessionParams; result: SessionResult };
	"session/tree": { params: SessionParams; result: SessionResult };
	recall: { params: RecallParams; result: RecallResult };
	"turn/settled": { params: TurnSettledParams; result: TurnSettledResult };
	"tool/call": { params: ToolCallParams; result: ToolCallResult };
	"command/run": { params: CommandRunParams; result: CommandStep };
	"command/answer": { params: CommandAnswerParams; result: CommandStep };
	"learning/trigger": { params: LearningTriggerParams; result: LearningTriggerResult };
	shutdown: { params: ShutdownParams; result: ShutdownResult };
}
export type Method = keyof Requests;

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
