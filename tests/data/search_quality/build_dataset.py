"""Writes turns.jsonl and queries.jsonl: the labelled search-quality set.

    .venv/bin/python tests/data/search_quality/build_dataset.py

The signal turns and queries are hand-written (signal_turns.py). The noise turns are routine
coding-agent chatter (renames, error explanations, test additions, reviews) built from templates
with a fixed seed, so the output is the same on every run. Noise shares the vocabulary of the
queries (tests, config, timeouts, deploy, 数据库, 接口, 日志 ...) but never answers one, which is
what makes ranking, rather than mere matching, necessary.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from signal_turns import QUERIES, SIGNAL_TURNS  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
NOISE_TURNS = 240
SEED = 20261129

IDENTIFIERS = [
    "computeTax",
    "loadConfig",
    "retryPolicy",
    "OrderService",
    "parseInvoice",
    "CartSummary",
    "fetchUserProfile",
    "RefundHandler",
    "buildQuery",
    "validateEmail",
    "normalizeAddress",
    "ShippingQuote",
    "applyCoupon",
    "InventoryRepo",
    "renderChart",
    "trainEpoch",
    "splitDataset",
    "TokenBucket",
    "rateLimiter",
    "encodeCursor",
    "decodeCursor",
    "ReportExporter",
    "syncLedger",
    "handleWebhook",
    "useDebounce",
    "formatDate",
    "PaymentIntent",
    "mergeSegments",
    "scheduleJob",
    "health_check",
    "send_invoice_email",
    "resolve_tenant",
    "compute_features",
    "load_checkpoint",
]
PATHS = [
    "internal/billing/tax.go",
    "internal/orders/service.go",
    "cmd/api/main.go",
    "pkg/cache/redis.go",
    "internal/refunds/handler.go",
    "src/components/Cart.tsx",
    "src/pages/Checkout.tsx",
    "src/hooks/useDebounce.ts",
    "src/lib/format.ts",
    "src/stores/cartStore.ts",
    "app/models/user.py",
    "pipeline/train.py",
    "pipeline/evaluate.py",
    "features/geo.py",
    "scripts/backfill.py",
    "src/main.rs",
    "src/commands/sync.rs",
    "deploy/values.yaml",
    "monitoring/dashboards/api.json",
    "terraform/modules/vpc/main.tf",
]
ERRORS_EN = [
    "nil pointer dereference",
    "TypeError: Cannot read properties of undefined",
    "KeyError: 'amount'",
    "context deadline exceeded",
    "connection refused",
    "index out of range",
    "unexpected EOF",
    "permission denied",
    "ModuleNotFoundError",
    "borrowed value does not live long enough",
    "duplicate key value violates unique constraint",
    "CORS policy blocked the request",
]
CAUSES_EN = [
    "the struct is used before it is initialized",
    "the response body is read twice",
    "the map lookup has no default",
    "a goroutine outlives the request context",
    "the port in the config does not match the container",
    "the slice is empty on the first page",
    "the file is truncated when the upload aborts",
    "the test runs as a different user",
    "the import path changed after the refactor",
    "the iterator borrows the vector mutably",
    "the seed data inserts the same row twice",
    "the dev server sends no Access-Control header",
]
FIXES_EN = [
    "added a guard and an early return",
    "moved the initialization into the constructor",
    "switched to a default value",
    "passed the context through",
    "read the value from the config",
    "added a bounds check",
    "wrapped the write in a temp file and rename",
    "fixed the fixture",
]
CASES_EN = [
    "an empty cart",
    "a negative amount",
    "a missing tenant",
    "an expired token",
    "a duplicate request",
    "unicode input",
    "a zero quantity",
    "a very large page size",
    "a timeout from the upstream",
]
ERRORS_ZH = [
    "空指针异常",
    "连接超时",
    "数组越界",
    "JSON 解析失败",
    "权限不足",
    "唯一索引冲突",
    "接口返回 502",
]
CAUSES_ZH = [
    "结构体在初始化之前就被使用了",
    "上游接口在高峰期响应变慢",
    "分页参数没有做边界检查",
    "字段名和接口文档不一致",
    "容器里的运行用户没有写权限",
    "测试数据重复插入了同一行",
    "网关的健康检查路径配置错了",
]
FIXES_ZH = [
    "加了判空和提前返回",
    "把重试逻辑挪到了客户端",
    "补上了边界检查",
    "按接口文档改了字段名",
    "修正了测试数据",
]
CASES_ZH = ["空购物车", "负数金额", "重复请求", "过期的令牌", "超大分页", "租户不存在"]
DUTIES_ZH = [
    "计算订单的税费",
    "把账单导出成 CSV",
    "校验用户输入的邮箱",
    "合并索引分段",
    "调度后台任务",
    "刷新缓存",
]


def _noise_turn(rng: random.Random) -> tuple[str, str]:
    ident, other = rng.sample(IDENTIFIERS, 2)
    path = rng.choice(PATHS)
    n = rng.randint(2, 9)
    kind = rng.randrange(12)
    if kind == 0:
        return (
            f"Can you rename `{ident}` to `{other}` in {path}?",
            f"Done: renamed `{ident}` to `{other}` in {path} and updated {n} call sites.",
        )
    if kind == 1:
        i = rng.randrange(len(ERRORS_EN))
        return (
            f"Why does {path} fail with {ERRORS_EN[i]}?",
            f"The {ERRORS_EN[i]} happens because {CAUSES_EN[i]}; I {rng.choice(FIXES_EN)}.",
        )
    if kind == 2:
        case = rng.choice(CASES_EN)
        return (
            f"Add a unit test for {ident} covering {case}.",
            f"Added a test for {ident} with {n} cases, including {case}. All tests pass.",
        )
    if kind == 3:
        return (
            f"Explain what {ident} in {path} does.",
            f"{ident} takes the request, validates it and calls {other}; errors are returned to the caller.",
        )
    if kind == 4:
        return (
            f"Review the change to {path}, anything wrong?",
            f"Looks fine overall. {ident} could return early, "
            f"and the log line in {other} repeats the message.",
        )
    if kind == 5:
        return (
            f"Make {ident} configurable instead of fixed.",
            f"{ident} now reads its setting from the config struct, with the old value as the default.",
        )
    if kind == 6:
        return (
            f"帮我把 {path} 里的 {ident} 改名为 {other}",
            f"已修改，{path} 中 {ident} 改成了 {other}，共有 {n} 处调用同步更新。",
        )
    if kind == 7:
        i = rng.randrange(len(ERRORS_ZH))
        return (
            f"{path} 报错：{ERRORS_ZH[i]}，帮我看看",
            f"这个错误是因为{CAUSES_ZH[i]}，我已经{rng.choice(FIXES_ZH)}，本地测试通过。",
        )
    if kind == 8:
        case = rng.choice(CASES_ZH)
        return (
            f"给 {ident} 补一个单元测试，覆盖{case}的情况",
            f"已添加 {ident} 的测试，覆盖{case}等 {n} 个场景，全部通过。",
        )
    if kind == 9:
        return (f"解释一下 {ident} 是做什么的", f"{ident} 负责{rng.choice(DUTIES_ZH)}，内部会调用 {other}。")
    if kind == 10:
        return (
            f"{path} 这段代码能不能写得更简洁一点？",
            f"可以，把 {ident} 里重复的分支合并了，并抽出 {other} 作为辅助函数，行为不变。",
        )
    return (
        f"Run the linter on {path} and fix what it finds.",
        f"Fixed {n} lint findings in {path}: unused imports, a shadowed variable and a missing error check.",
    )


def build() -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    rng = random.Random(SEED)
    turns = [{"id": i, "session": s, "user": u, "assistant": a} for i, s, u, a in SIGNAL_TURNS]
    for n in range(NOISE_TURNS):
        user, assistant = _noise_turn(rng)
        turns.append(
            {"id": f"noise-{n:03d}", "session": f"noise-{n % 7}", "user": user, "assistant": assistant}
        )
    # Interleave, so that no ranking can profit from insertion order.
    rng.shuffle(turns)
    known = {t["id"] for t in turns}
    queries: list[dict[str, object]] = []
    for qid, query, relevant in QUERIES:
        missing = set(relevant) - known
        if missing:
            raise ValueError(f"{qid} names unknown turns {sorted(missing)}")
        queries.append({"id": qid, "query": query, "relevant": relevant})
    return turns, queries


def main() -> None:
    turns, queries = build()
    with (HERE / "turns.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in turns)
    with (HERE / "queries.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    print(f"{len(turns)} turns, {len(queries)} queries")


if __name__ == "__main__":
    main()
