/**
 * The background sidecar: one `pi-memory-bridge serve` per agent dir, shared by every Pi process,
 * so its imports and its embedding model are paid once instead of at every `pi -p`.
 * On by default for the memory program the shim finds itself (`daemonEnabled`); where it is off,
 * or the socket cannot be used, the caller spawns a stdio child of its own.
 *
 * The socket's name is a hash of everything that decides the sidecar's behaviour (command, the
 * command file's identity, this extension's release, the environment the sidecar reads), so two
 * Pis share a daemon only when separate sidecars would have behaved the same. It lives in a 0700
 * folder of this user; the daemon creates it 0600.
 *
 * `openDaemon` returns a stand-in for the child process with the same surface the `Sidecar` uses
 * (stdin, stdout, exit, kill): lines written before the connection is up are buffered. When
 * nothing answers, it spawns the sidecar detached (own process group, stdio not tied to Pi,
 * unref'd) with `PI_MEMORY_BRIDGE_SOCKET` set, and connects as soon as it listens. Several Pis
 * starting together may each spawn one: the daemon's lock makes all but one leave at once.
 * Deadlines stay the `Sidecar`'s: it kills this stand-in when the handshake is late, which ends
 * the connection, and also the daemon when it never said a word (never listened, or hung).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { lstatSync, mkdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { isAbsolute, join } from "node:path";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { DAEMON_CONTRACT } from "./generated/tables.ts";
import { CLIENT_VERSION } from "./protocol.ts";

export const DAEMON_VAR = DAEMON_CONTRACT.daemonVar;
export const SOCKET_VAR = DAEMON_CONTRACT.socketVar;
const CONNECT_RETRY_MS = 15;
const CONNECT_GIVE_UP_MS = 30_000; // the Sidecar's deadline comes first; this only bounds a forgotten attempt
const MAX_SOCKET_PATH = 100; // sun_path holds 108 bytes on Linux, 104 on macOS
// what the sidecar reads from its environment (config, embeddings, keys, Python itself)
const KEY_PREFIXES: readonly string[] = DAEMON_CONTRACT.keyPrefixes;
const KEY_NAMES = new Set<string>(DAEMON_CONTRACT.keyNames);
const NOT_IN_KEY = new Set<string>(DAEMON_CONTRACT.perRunVars); // set per run, or read by the shim only

/** What the Sidecar needs of its child: a ChildProcess, or the daemon connection standing in for one. */
export interface SidecarChild {
	readonly pid?: number | undefined;
	readonly stdin: Writable | null;
	readonly stdout: Readable | null;
	readonly stderr: Readable | null;
	kill(signal?: NodeJS.Signals): boolean;
	unref(): void;
	on(event: "exit", listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
	on(event: "error", listener: (err: Error) => void): this;
}

/**
 * `PI_MEMORY_BRIDGE_DAEMON`: 1/true/yes/on or 0/false/no/off; unset, it is on for the memory
 * program the shim finds itself and off for a `PI_MEMORY_BRIDGE_CMD` (a wrapper or a stand-in that
 * was written for a child of its own keeps that meaning).
 */
export function daemonEnabled(env: NodeJS.ProcessEnv): boolean {
	const raw = (env[DAEMON_VAR] ?? "").trim().toLowerCase();
	if (["1", "true", "yes", "on"].includes(raw)) return true;
	if (["0", "false", "no", "off"].includes(raw)) return false;
	return !env.PI_MEMORY_BRIDGE_CMD?.trim();
}

function commandIdentity(cmd: string): string {
	try {
		const real = realpathSync(cmd);
		const st = statSync(real);
		return `${real}:${st.ino}:${st.size}:${st.mtimeMs}`; // an upgrade rewrites the entry script
	} catch {
		return cmd; // found on PATH at spawn time
	}
}

/** The socket for this command and environment, in a private folder; undefined when there is none. */
export function socketPath(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv): string | undefined {
	const uid = process.getuid?.();
	if (uid === undefined) return undefined;
	const relevant = Object.keys(env)
		.filter((k) => !NOT_IN_KEY.has(k) && (KEY_NAMES.has(k) || KEY_PREFIXES.some((p) => k.startsWith(p))))
		.sort()
		.map((k) => [k, env[k]]);
	const agentDir = env.PI_CODING_AGENT_DIR;
	const identity = JSON.stringify({
		cmd,
		args,
		command: commandIdentity(cmd),
		client: CLIENT_VERSION,
		env: relevant,
		cwd: agentDir && !isAbsolute(agentDir) ? process.cwd() : null, // a relative agent dir means this folder's
	});
	const name = createHash("sha256").update(identity).digest("hex").slice(0, 32);
	const base = DAEMON_CONTRACT.runtimeDirVars.map((v) => env[v]).find((v) => v) ?? DAEMON_CONTRACT.runtimeDirFallback;
	const dir = join(base, `${DAEMON_CONTRACT.socketDirPrefix}${uid}`);
	const path = join(dir, `${name}${DAEMON_CONTRACT.socketSuffix}`);
	if (Buffer.byteLength(path) > MAX_SOCKET_PATH) return undefined;
	try {
		mkdirSync(dir, { mode: 0o700 });
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code !== "EEXIST") return undefined;
	}
	try {
		const st = lstatSync(dir);
		if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0) return undefined; // not ours alone
	} catch {
		return undefined;
	}
	return path;
}

/** The daemon serving `path`, as a child-process stand-in; undefined when it is not switched on or not usable. */
export function openDaemon(cmd: string, args: string[], env: NodeJS.ProcessEnv): SidecarChild | undefined {
	if (!daemonEnabled(env)) return undefined;
	const path = socketPath(cmd, args, env);
	if (!path) return undefined;
	const connection = new DaemonConnection(path, cmd, args, env);
	connection.start();
	return connection;
}

class DaemonConnection extends EventEmitter implements SidecarChild {
	readonly stdin = new PassThrough();
	readonly stdout = new PassThrough();
	readonly stderr = new PassThrough();
	private socket: Socket | undefined;
	private spawned: ChildProcess | undefined;
	private spawnedRunning = false;
	private readonly queued: Buffer[] = []; // written before the connection is up
	private readonly unanswered: Buffer[] = []; // written before the daemon said anything: replayed on a retry
	private retriesLeft = 1;
	private heard = false; // the daemon has sent us something: it is alive and serving
	private ended = false; // our EOF
	private done = false;
	private retry: ReturnType<typeof setTimeout> | undefined;
	private readonly giveUpAt = Date.now() + CONNECT_GIVE_UP_MS;

	readonly socketFile: string;
	private readonly cmd: string;
	private readonly args: string[];
	private readonly env: NodeJS.ProcessEnv;

	constructor(socketFile: string, cmd: string, args: string[], env: NodeJS.ProcessEnv) {
		super();
		this.socketFile = socketFile;
		this.cmd = cmd;
		this.args = args;
		this.env = env;
		this.stdin.on("data", (chunk: Buffer) => {
			if (!this.heard) this.unanswered.push(chunk);
			if (this.socket) this.socket.write(chunk);
			else this.queued.push(chunk);
		});
		this.stdin.on("end", () => {
			this.ended = true;
			this.socket?.end(); // our EOF: the daemon ends this connection's engine
		});
	}

	get pid(): number | undefined {
		return this.spawned?.pid;
	}

	/** We sent the daemon something it never answered (a prestarted connection may send nothing). */
	private get silent(): boolean {
		return this.unanswered.length > 0 && !this.heard;
	}

	start(): void {
		const s = connect(this.socketFile);
		s.unref();
		s.once("connect", () => this.attach(s));
		s.once("error", (e: NodeJS.ErrnoException) => {
			if (this.done || this.socket === s) return;
			s.destroy();
			if (e.code !== "ENOENT" && e.code !== "ECONNREFUSED" && e.code !== "EAGAIN") {
				this.finish(`cannot connect to ${this.socketFile}: ${e.message}`);
				return;
			}
			if (!this.spawned) this.spawnDaemon();
			if (Date.now() > this.giveUpAt) return this.finish("the background sidecar never listened");
			this.retry = setTimeout(() => this.start(), CONNECT_RETRY_MS);
			this.retry.unref();
		});
	}

	private attach(s: Socket): void {
		if (this.done) {
			s.destroy();
			return;
		}
		this.socket = s;
		s.on("data", (chunk: Buffer) => {
			this.heard = true;
			this.unanswered.length = 0;
			this.stdout.write(chunk);
		});
		s.on("error", () => undefined); // "close" follows
		s.on("close", () => this.closed(s));
		for (const chunk of this.queued.splice(0)) s.write(chunk);
		if (this.ended) s.end();
	}

	/**
	 * A daemon that closes a connection it never answered was on its way out (SIGKILLed with its
	 * threads still closing, or stopped): connect once more, starting the next one if need be, and
	 * send again what it never answered (only the handshake can be unanswered: calls wait for it).
	 */
	private closed(s: Socket): void {
		if (this.done || this.socket !== s) return;
		if (!this.heard && !this.ended && this.retriesLeft > 0 && Date.now() < this.giveUpAt) {
			this.retriesLeft -= 1;
			this.socket = undefined;
			this.queued.push(...this.unanswered);
			if (!this.spawnedRunning) this.spawned = undefined; // may start the next daemon
			this.retry = setTimeout(() => this.start(), CONNECT_RETRY_MS);
			this.retry.unref();
			return;
		}
		this.finish();
	}

	private spawnDaemon(): void {
		let child: ChildProcess;
		try {
			child = spawn(this.cmd, this.args, {
				detached: true, // its own process group: Ctrl-C in Pi's terminal is not for it
				stdio: "ignore", // nothing ties it to this Pi
				env: { ...this.env, [SOCKET_VAR]: this.socketFile },
			});
		} catch (e) {
			this.done = true;
			this.emit("error", e instanceof Error ? e : new Error(String(e)));
			return;
		}
		child.unref();
		this.spawned = child;
		this.spawnedRunning = true;
		child.on("error", (e) => {
			this.spawnedRunning = false;
			if (this.done) return;
			this.done = true;
			clearTimeout(this.retry);
			this.emit("error", e);
		});
		child.on("exit", (code, signal) => {
			this.spawnedRunning = false;
			// code 0 before we connected: another daemon won the lock, and we connect to that one
			if (!this.socket && (code !== 0 || signal)) this.finish(undefined, code, signal);
		});
	}

	/**
	 * Ends our connection. SIGKILL (the Sidecar gave up on it) also ends what we spawned and never
	 * reached, and a daemon that took our request and never said a word (its loop is stuck: every
	 * Pi would wait on it). One that answered before keeps serving the others: what hangs is this
	 * connection's engine, and ours ends with the connection.
	 */
	kill(signal: NodeJS.Signals = "SIGTERM"): boolean {
		if (signal === "SIGKILL") {
			if (this.spawned?.pid && this.spawnedRunning && !this.socket) signalGroup(this.spawned.pid);
			else if (this.socket && this.silent) killLockHolder(this.socketFile);
		}
		this.finish();
		return true;
	}

	unref(): void {
		/* every handle of ours is unref'd already */
	}

	private finish(reason?: string, code: number | null = 0, signal: NodeJS.Signals | null = null): void {
		if (this.done) return;
		this.done = true;
		clearTimeout(this.retry);
		this.socket?.destroy();
		if (reason) this.stderr.write(`${reason}\n`);
		// after the stderr line reached the Sidecar's listener, as a child's exit follows its output
		setImmediate(() => this.emit("exit", reason ? 1 : code, signal));
	}
}

function signalGroup(pid: number): void {
	try {
		process.kill(-pid, "SIGKILL"); // the wrapper and whatever it started
	} catch {
		/* gone */
	}
}

/** A daemon that accepted us and then said nothing by the deadline is hung: end it for every Pi. */
function killLockHolder(socketFile: string): void {
	try {
		const pid = Number.parseInt(readFileSync(`${socketFile}${DAEMON_CONTRACT.lockSuffix}`, "utf8"), 10);
		if (Number.isInteger(pid) && pid > 1 && pid !== process.pid) process.kill(pid, "SIGKILL");
	} catch {
		/* gone, or not ours */
	}
}
