/**
 * JSON-RPC 2.0 client over a child's stdio: one JSON object per "\n"-terminated line.
 * Only "\n" splits lines (never readline, which also splits on U+2028/U+2029).
 */
import { StringDecoder } from "node:string_decoder";

export class RpcError extends Error {
	readonly code: number;
	readonly data: unknown;
	constructor(code: number, message: string, data?: unknown) {
		super(message);
		this.name = "RpcError";
		this.code = code;
		this.data = data;
	}
}

export class RpcTimeout extends Error {
	constructor(method: string, ms: number) {
		super(`${method}: no answer within ${ms} ms`);
		this.name = "RpcTimeout";
	}
}

export class RpcClosed extends Error {
	constructor(reason: string) {
		super(reason);
		this.name = "RpcClosed";
	}
}

type Pending = { method: string; resolve: (v: unknown) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> };

export interface RequestOptions {
	/**
	 * Pi awaits this answer: keep Node's event loop alive until it arrives or the deadline passes.
	 * Nothing else of ours holds the loop (the child and its pipes are unref'd), so without this a
	 * `pi -p` with nothing else to do could exit mid-await; with it, at most until the deadline.
	 */
	hold?: boolean;
}

export type NotificationHandler = (method: string, params: unknown) => void;
/** Answers a request from the peer (the sidecar asks too, e.g. `model/complete`); throw RpcError to refuse. */
export type RequestHandler = (method: string, params: unknown) => Promise<unknown>;

export class LineSplitter {
	private buf = "";
	private readonly decoder = new StringDecoder("utf8");

	push(chunk: Buffer | string): string[] {
		this.buf += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
		const lines: string[] = [];
		let i: number;
		while ((i = this.buf.indexOf("\n")) >= 0) {
			const line = this.buf.slice(0, i);
			this.buf = this.buf.slice(i + 1);
			if (line.trim()) lines.push(line);
		}
		return lines;
	}
}

export class RpcClient {
	private nextId = 1;
	private readonly pending = new Map<number, Pending>();
	private readonly splitter = new LineSplitter();
	private closed: string | undefined;
	private missedSinceAnswer = false;
	private readonly write: (line: string) => void;
	private readonly onNotification: NotificationHandler;
	private readonly onRequest: RequestHandler | undefined;

	constructor(write: (line: string) => void, onNotification: NotificationHandler = () => {}, onRequest?: RequestHandler) {
		this.write = write;
		this.onNotification = onNotification;
		this.onRequest = onRequest;
	}

	/** Feed bytes read from the peer's stdout. */
	feed(chunk: Buffer | string): void {
		for (const line of this.splitter.push(chunk)) this.handleLine(line);
	}

	request<T>(method: string, params: unknown, timeoutMs: number, options: RequestOptions = {}): Promise<T> {
		if (this.closed !== undefined) return Promise.reject(new RpcClosed(this.closed));
		const id = this.nextId++;
		return new Promise<T>((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(id);
				this.missedSinceAnswer = true;
				reject(new RpcTimeout(method, timeoutMs));
			}, Math.max(0, timeoutMs));
			if (!options.hold) timer.unref?.();
			this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
			try {
				this.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
			} catch (e) {
				clearTimeout(timer);
				this.pending.delete(id);
				reject(new RpcClosed(`cannot write to the sidecar: ${(e as Error).message}`));
			}
		});
	}

	get inFlight(): number {
		return this.pending.size;
	}

	/** A call ran out of time and the peer has answered nothing since: treat it as not answering. */
	get unresponsive(): boolean {
		return this.missedSinceAnswer;
	}

	/** Fail every pending call and refuse new ones. */
	close(reason: string): void {
		if (this.closed !== undefined) return;
		this.closed = reason;
		for (const [id, p] of this.pending) {
			clearTimeout(p.timer);
			p.reject(new RpcClosed(reason));
			this.pending.delete(id);
		}
	}

	private answer(id: string | number, method: string, params: unknown): void {
		const reply = (body: Record<string, unknown>): void => {
			if (this.closed !== undefined) return;
			try {
				this.write(JSON.stringify({ jsonrpc: "2.0", id, ...body }) + "\n");
			} catch {
				/* the sidecar is gone; it fails its own wait */
			}
		};
		const handled = this.onRequest ? this.onRequest(method, params) : Promise.reject(new RpcError(-32601, `unknown method ${method}`));
		handled.then(
			(result) => reply({ result: result ?? null }),
			(e: unknown) => reply({ error: { code: e instanceof RpcError ? e.code : -32603, message: e instanceof Error ? e.message : String(e) } }),
		);
	}

	private handleLine(line: string): void {
		let msg: unknown;
		try {
			msg = JSON.parse(line);
		} catch {
			return; // not ours to interpret; the sidecar logs its own problems
		}
		if (typeof msg !== "object" || msg === null) return;
		const m = msg as { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
		if (typeof m.method === "string" && m.id === undefined) {
			this.onNotification(m.method, m.params);
			return;
		}
		if (typeof m.method === "string" && (typeof m.id === "string" || typeof m.id === "number")) {
			this.answer(m.id, m.method, m.params);
			return;
		}
		if (typeof m.id !== "number") return;
		this.missedSinceAnswer = false;
		const p = this.pending.get(m.id);
		if (!p) return; // answered after its deadline: dropped
		this.pending.delete(m.id);
		clearTimeout(p.timer);
		if (m.error && typeof m.error === "object") {
			const e = m.error as { code?: unknown; message?: unknown; data?: unknown };
			p.reject(new RpcError(typeof e.code === "number" ? e.code : -32603, String(e.message ?? "error"), e.data));
		} else {
			p.resolve(m.result);
		}
	}
}
