"""What recall costs at a provider that caches request prefixes, on both Pi versions.

    .venv/bin/python bench/bench_prompt_cache.py [--log-chars 2500 600]

One `pi --mode rpc` session of 8 turns (a question and a pasted log each; 6 of them ask what an
earlier session said) against the scripted model, once with Pi alone and once with memory (after
an earlier session that told Pi six facts). Each request is compared with the previous one:
the share that repeats it from the first byte, and the session's input cost at cache prices
(cached 0.1, the rest 1.0, per character), plus the characters recall adds per turn. The same
scenario is the acceptance E2E (e2e/test_e2e_prompt_cache.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))
from bridge import use_bridge  # noqa: E402
from harness import FakeModel, PiEnv, RecordedRequest, pi_installs  # noqa: E402
from prompt_cache import (  # noqa: E402
    BRIDGE_CONFIG,
    FACTS,
    QUESTIONS,
    request_costs,
    run_session,
    seed_earlier_session,
    session_cost,
)


def _row(label: str, values: list[str]) -> str:
    return f"  {label:<28}" + " ".join(f"{v:>7}" for v in values)


def _recalled(requests: list[RecordedRequest]) -> list[str]:
    out = []
    for i, r in enumerate(requests):
        fact = QUESTIONS[i][1]
        given = fact is not None and any(FACTS[fact] in b for b in r.recalled_blocks)
        out.append("-" if fact is None else "yes" if given else "no")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-chars", type=int, nargs="+", default=[2500, 600])
    a = ap.parse_args()
    for install in pi_installs():
        for log_chars in a.log_chars:
            with tempfile.TemporaryDirectory() as tmp, FakeModel() as model:
                env = PiEnv(install, Path(tmp) / "pi", model.base_url)
                try:
                    use_bridge(env, config=BRIDGE_CONFIG)
                    alone = run_session(env, model, memory=False, log_chars=log_chars)
                    seed_earlier_session(env, model)
                    memory = run_session(env, model, memory=True, log_chars=log_chars)
                finally:
                    env.close()
            turns = [str(i + 1) for i in range(len(QUESTIONS))]
            print(f"pi {install.version}, {log_chars} chars of pasted log per turn")
            print(_row("turn", turns))
            for label, requests in (("Pi alone", alone), ("with memory", memory)):
                costs = request_costs(requests)
                print(_row(f"{label}: shared prefix", [f"{c.share:.2f}" for c in costs]))
                print(_row(f"{label}: request chars", [str(c.chars) for c in costs]))
            print(_row("recall adds (chars)", [str(len(r.recalled_block)) for r in memory]))
            print(_row("its fact in a recalled block", _recalled(memory)))
            cost_alone, cost_memory = session_cost(alone), session_cost(memory)
            print(
                f"  input cost at cache prices: Pi alone {cost_alone:.0f}, with memory {cost_memory:.0f}"
                f" = {cost_memory / cost_alone:.2f}x"
            )


if __name__ == "__main__":
    main()
