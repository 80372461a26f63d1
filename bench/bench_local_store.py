"""Latency and quality of the local store's searches at 1k, 10k and 100k turns.

    .venv/bin/python bench/bench_local_store.py [--sizes 1000,10000,100000] [--queries 200]

For each size it builds a fresh store in a temporary directory from deterministic synthetic
turns (mixed English and Chinese coding-agent chatter with Zipf-distributed vocabulary,
identifiers and paths), plus the labelled search-quality turns from tests/data/search_quality,
then times `conversation.search` and `memories.search` through the async `LocalBackend` API, one
call at a time, and prints p50/p95/p99. It also prints recall@4 of the labelled queries against
the labelled turns alone and buried in each synthetic store. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "tests" / "data" / "search_quality"
SEED = 7
BATCH = 5000
ATOMIC_PER_STORE = 1000


def _words(text: str) -> list[str]:
    return text.split()


DEV_WORDS = _words("""
test tests build deploy config configuration timeout retry cache database query index migration
schema table column row request response handler server client service endpoint route api error
exception log logs logging metric metrics trace span latency throughput memory leak cpu thread
goroutine async await promise future callback event queue worker job cron schedule lock mutex
deadlock race condition branch merge rebase commit push pull review diff patch release version
tag docker image container pod cluster node namespace helm chart ingress secret token auth login
session cookie header payload json yaml toml parse serialize encode decode buffer stream file
path directory module package dependency import export function method class struct interface
type generic field variable constant argument parameter return value null nil undefined panic
benchmark profile flame graph allocation garbage collector heap stack pointer reference borrow
lifetime ownership compile compiler linker warning lint format style naming refactor rename
extract inline split duplicate dead code coverage fixture mock stub fake integration unit e2e
flaky slow fast ci pipeline workflow runner artifact upload download bucket storage backup restore
replica primary shard partition transaction commit rollback isolation consistency idempotent key
""")
ZH_WORDS = _words("""
数据 接口 测试 部署 配置 超时 重试 缓存 数据库 查询 索引 迁移 表结构 请求 响应 服务 错误 异常 日志
指标 延迟 吞吐 内存 泄漏 线程 协程 异步 队列 任务 定时 锁 死锁 竞争 分支 合并 提交 评审 发布 版本
镜像 容器 集群 节点 命名空间 证书 密钥 令牌 登录 会话 解析 序列化 编码 文件 路径 目录 模块 依赖
函数 方法 结构体 接口定义 类型 泛型 字段 变量 常量 参数 返回值 空指针 性能 分析 分配 回收 引用
编译 链接 警告 格式 风格 命名 重构 重命名 提取 重复 覆盖率 模拟 集成 单元 端到端 不稳定 流水线
上传 下载 存储 备份 恢复 副本 主库 分片 分区 事务 回滚 隔离 一致性 幂等 用户 订单 支付 退款 账户
""")
ZH_GLUE = list("的了是在把被和也都就还很要会能用给对从到")
EN_GLUE = _words("the a is to of and in for on with it this that we you be can should")


def _zipf_weights(n: int, s: float = 1.05) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank**s) for rank in range(1, n + 1)))


class SyntheticCorpus:
    """Deterministic mixed-language turns: real dev words plus a long tail of made-up ones."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        pseudo = {
            "".join(self.rng.choice(syllables) for _ in range(self.rng.randint(2, 3))) for _ in range(12000)
        }
        self.en_vocab = DEV_WORDS + sorted(pseudo)
        self.en_cum = _zipf_weights(len(self.en_vocab))
        common = [chr(c) for c in range(0x4E00, 0x4E00 + 2500, 3)]
        pairs = {self.rng.choice(common) + self.rng.choice(common) for _ in range(6000)}
        self.zh_vocab = ZH_WORDS + sorted(pairs)
        self.zh_cum = _zipf_weights(len(self.zh_vocab))

    def _identifier(self) -> str:
        a, b = self.rng.choices(self.en_vocab, cum_weights=self.en_cum, k=2)
        return self.rng.choice([f"{a}{b.capitalize()}", f"{a}_{b}", f"src/{a}/{b}.py", f"pkg/{a}/{b}.go"])

    def _english(self, n: int) -> str:
        words = self.rng.choices(self.en_vocab, cum_weights=self.en_cum, k=n)
        out = []
        for word in words:
            out.append(word)
            if self.rng.random() < 0.35:
                out.append(self.rng.choice(EN_GLUE))
            if self.rng.random() < 0.06:
                out.append(self._identifier())
        return " ".join(out) + "."

    def _chinese(self, n: int) -> str:
        words = self.rng.choices(self.zh_vocab, cum_weights=self.zh_cum, k=n)
        out = []
        for word in words:
            out.append(word)
            if self.rng.random() < 0.4:
                out.append(self.rng.choice(ZH_GLUE))
            if self.rng.random() < 0.08:
                out.append(f" {self._identifier()} ")
        return "".join(out) + "。"

    def text(self, low: int, high: int) -> str:
        n = self.rng.randint(low, high)
        return self._chinese(n) if self.rng.random() < 0.4 else self._english(n)

    def turns(self, count: int, start: datetime) -> list[ConversationTurn]:
        return [
            ConversationTurn(
                turn_id=f"syn-{i:06d}",
                memory_session_id=f"session-{i // 40}",
                user_text=self.text(6, 25),
                assistant_text=self.text(15, 70),
                created_at=start + timedelta(seconds=i),
            )
            for i in range(count)
        ]

    def query(self) -> str:
        return self.text(2, 8)


def _labelled() -> tuple[list[ConversationTurn], list[tuple[str, list[str]]]]:
    stamp = datetime(2026, 6, 1, tzinfo=UTC)
    turns = [
        ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], stamp)
        for t in map(json.loads, (LABELLED / "turns.jsonl").read_text(encoding="utf-8").splitlines())
    ]
    queries = [
        (q["query"], list(q["relevant"]))
        for q in map(json.loads, (LABELLED / "queries.jsonl").read_text(encoding="utf-8").splitlines())
    ]
    return turns, queries


def _store_megabytes(root: Path) -> float:
    return sum(p.stat().st_size for p in root.glob("memory.sqlite3*")) / 1e6


def _percentiles(samples_ms: Sequence[float]) -> str:
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return f"p50 {cuts[49]:6.2f}  p95 {cuts[94]:6.2f}  p99 {cuts[98]:6.2f}  max {max(samples_ms):6.2f} ms"


async def _recall_at_4(backend: LocalBackend, queries: Sequence[tuple[str, list[str]]]) -> float:
    total = 0.0
    for query, relevant in queries:
        hits = {h.turn_id for h in await backend.conversation.search(query, 4)}
        total += len(hits & set(relevant)) / min(4, len(relevant))
    return total / len(queries)


async def _timed(calls: Sequence[str], search: object) -> list[float]:
    samples = []
    for query in calls:
        started = time.perf_counter()
        await search(query)  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def bench_size(
    size: int, n_queries: int, labelled: tuple[list[ConversationTurn], list[tuple[str, list[str]]]]
) -> None:
    corpus = SyntheticCorpus(SEED)
    labelled_turns, labelled_queries = labelled
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        backend = LocalBackend(Path(tmp))
        turns = corpus.turns(size, datetime(2026, 1, 1, tzinfo=UTC))
        # The labelled turns sit in the middle of the history, neither newest nor oldest.
        middle = len(turns) // 2
        turns[middle:middle] = labelled_turns
        started = time.perf_counter()
        for start in range(0, len(turns), BATCH):
            backend.store.conversation.add(turns[start : start + BATCH])
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(ATOMIC_PER_STORE):
            backend.store.memories.save(
                corpus.text(5, 20), ("fact", "preference", "constraint")[i % 3], "bench"
            )
        atomic_s = time.perf_counter() - started
        db_mb = _store_megabytes(Path(tmp))

        rng = random.Random(size)
        mixed = [q for q, _ in labelled_queries]
        mixed += [corpus.query() for _ in range(max(0, n_queries - len(mixed)))]
        mixed = mixed[:n_queries]
        rng.shuffle(mixed)
        for query in mixed[:20]:  # warm the page cache and the pool
            await backend.conversation.search(query, 4)
        l0 = await _timed(mixed, lambda q: backend.conversation.search(q, 4))
        l1 = await _timed(mixed, lambda q: backend.memories.search(q, 6))
        both = await _timed(
            mixed,
            lambda q: asyncio.gather(backend.conversation.search(q, 4), backend.memories.search(q, 6)),
        )
        huge = "parse the config and retry the 数据库 query " * 25_000  # ~1 MB
        started = time.perf_counter()
        await backend.conversation.search(huge, 4)
        huge_ms = (time.perf_counter() - started) * 1000
        recall = await _recall_at_4(backend, labelled_queries)
        started = time.perf_counter()
        report = await backend.conversation.delete([turns[middle - 1].turn_id])
        forget_ms = (time.perf_counter() - started) * 1000
        await backend.close()

    print(f"\n== {size:,} synthetic turns (+{len(labelled_turns)} labelled), {ATOMIC_PER_STORE} atomic ==")
    rate = len(turns) / build_s
    print(
        f"build: {build_s:5.1f} s for turns ({rate:,.0f} turns/s), "
        f"{atomic_s:4.1f} s for atomic; {db_mb:,.1f} MB"
    )
    print(f"search_conversation  {_percentiles(l0)}   ({len(l0)} queries)")
    print(f"search_atomic        {_percentiles(l1)}")
    print(f"both, concurrently   {_percentiles(both)}")
    print(f"1 MB query: {huge_ms:.1f} ms")
    print(f"forget one turn (FTS optimize + checkpoint): {forget_ms:.0f} ms ({len(report.deleted)} deleted)")
    print(f"recall@4 of the {len(labelled_queries)} labelled queries inside this store: {recall:.3f}")


async def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    labelled = _labelled()
    with tempfile.TemporaryDirectory(prefix="bench-labelled-") as tmp:
        backend = LocalBackend(Path(tmp))
        await backend.conversation.add(labelled[0])
        recall = await _recall_at_4(backend, labelled[1])
        await backend.close()
    print(f"labelled set alone: {len(labelled[0])} turns, {len(labelled[1])} queries, recall@4 {recall:.3f}")
    for size in (int(s) for s in args.sizes.split(",")):
        await bench_size(size, args.queries, labelled)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
