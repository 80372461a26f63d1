import { test } from "node:test";
import assert from "node:assert/strict";
import { LineSplitter, RpcClient, RpcClosed, RpcError, RpcTimeout } from "../src/rpc.ts";

test("splits on \\n only, keeps U+2028 inside a line, survives split UTF-8", () => {
	const s = new LineSplitter();
	const bytes = Buffer.from('{"a":"x\u2028y 讨厌"}\n{"b":1}\n', "utf8");
	const cut = bytes.indexOf(Buffer.from("讨", "utf8")) + 1; // in the middle of a multi-byte char
	const lines = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut))];
	assert.deepEqual(lines, ['{"a":"x\u2028y 讨厌"}', '{"b":1}']);
});

test("matches responses to requests by id, including out of order", async () => {
	const sent: string[] = [];
	const c = new RpcClient((l) => sent.push(l));
	const a = c.request<number>("a", {}, 1000);
	const b = c.request<number>("b", {}, 1000);
	const ids = sent.map((l) => JSON.parse(l).id as number);
	c.feed(`{"jsonrpc":"2.0","id":${ids[1]},"result":2}\n{"jsonrpc":"2.0","id":${ids[0]},"result":1}\n`);
	assert.equal(await a, 1);
	assert.equal(await b, 2);
	assert.ok(sent.every((l) => l.endsWith("\n")));
});

test("errors, timeouts and close reject with typed errors", async () => {
	const sent: string[] = [];
	const c = new RpcClient((l) => sent.push(l));
	const e = c.request("x", {}, 1000);
	c.feed(`{"jsonrpc":"2.0","id":${JSON.parse(sent[0]!).id},"error":{"code":-32602,"message":"bad"}}\n`);
	await assert.rejects(e, (err: unknown) => err instanceof RpcError && err.code === -32602);
	const keepAlive = setTimeout(() => {}, 1000); // the client's own timers are unref'd
	await assert.rejects(c.request("slow", {}, 20), RpcTimeout);
	clearTimeout(keepAlive);
	const pending = c.request("p", {}, 1000);
	c.close("gone");
	await assert.rejects(pending, RpcClosed);
	await assert.rejects(c.request("after", {}, 1000), RpcClosed);
});

test("notifications reach the handler; garbage lines are ignored", () => {
	const got: [string, unknown][] = [];
	const c = new RpcClient(() => {}, (m, p) => got.push([m, p]));
	c.feed('not json\n{"jsonrpc":"2.0","method":"status/changed","params":{"text":"memory: ready"}}\n42\n');
	assert.deepEqual(got, [["status/changed", { text: "memory: ready" }]]);
});

test("a call that runs out of time marks the peer unresponsive until it answers again", async () => {
	const sent: string[] = [];
	const c = new RpcClient((l) => sent.push(l));
	assert.equal(c.unresponsive, false);
	await assert.rejects(c.request("slow", {}, 20, { hold: true }), RpcTimeout);
	assert.equal(c.unresponsive, true);
	const next = c.request<number>("next", {}, 1000, { hold: true });
	c.feed(`{"jsonrpc":"2.0","id":${JSON.parse(sent[1]!).id},"result":7}\n`);
	assert.equal(await next, 7);
	assert.equal(c.unresponsive, false);
});

test("requests from the peer are answered through the handler, errors keep their code", async () => {
	const sent: string[] = [];
	const c = new RpcClient(
		(l) => sent.push(l),
		() => {},
		async (method, params) => {
			if (method === "echo") return params;
			throw new RpcError(-32011, "no auth");
		},
	);
	c.feed('{"jsonrpc":"2.0","id":"s1","method":"echo","params":{"a":1}}\n{"jsonrpc":"2.0","id":"s2","method":"x"}\n');
	await new Promise((r) => setImmediate(r));
	const answers = sent.map((l) => JSON.parse(l));
	assert.deepEqual(answers.find((a) => a.id === "s1"), { jsonrpc: "2.0", id: "s1", result: { a: 1 } });
	assert.deepEqual(answers.find((a) => a.id === "s2")?.error, { code: -32011, message: "no auth" });
	const bare = new RpcClient((l) => sent.push(l));
	bare.feed('{"jsonrpc":"2.0","id":"s3","method":"model/complete","params":{}}\n');
	await new Promise((r) => setImmediate(r));
	assert.equal(JSON.parse(sent.at(-1)!).error.code, -32601);
});
