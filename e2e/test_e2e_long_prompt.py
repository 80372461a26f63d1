"""A long prompt through real Pi: 2,500 characters of pasted log before the question recall what
the question alone recalls (issue 23, acceptance 2; the labelled figures: bench/bench_long_prompts.py)."""

from __future__ import annotations

import random

from bridge import SHIM, stored_turns, use_bridge
from harness import FakeModel, PiEnv, TextReply

FACTS = (
    "The staging cluster is called kestrel-west-kemub.",
    "Our on-call rotation changes every Tuesday at noon.",
)
QUESTION = "Deploy the cache fix to kestrel-west-kemub: is that the staging cluster?"


def pasted_log(chars: int) -> str:
    rng = random.Random(23)
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < chars:
        n = len(lines)
        lines.append(
            f"2026-03-14T09:{n // 60:02d}:{n % 60:02d}.{rng.randrange(1000):03d}Z "
            f"{rng.choice(('INFO ', 'DEBUG', 'WARN ', 'ERROR'))} [http-worker-{rng.randrange(9)}] "
            f"gateway: GET /api/v1/orders/{rng.randrange(10**5)} 200 {rng.randrange(2, 900)}ms"
        )
    return "\n".join(lines)


def _recalled(fake_model: FakeModel) -> str:
    """The recalled block of the last request, wherever the extension put it."""
    text = fake_model.last_request().all_text
    start = text.find("<recalled_memory")
    return text[start : text.find("</recalled_memory>", start)] if start >= 0 else ""


def test_a_question_after_a_pasted_log_recalls_what_it_recalls_alone(
    pi_env: PiEnv, fake_model: FakeModel
) -> None:
    use_bridge(pi_env)
    for fact in FACTS:
        fake_model.script(TextReply("Noted."))
        assert pi_env.run_print([fact], extensions=[SHIM]).returncode == 0
    assert {t["user_text"] for t in stored_turns(pi_env)} >= set(FACTS)
    log = pasted_log(2500)
    fake_model.script(TextReply("Yes."))
    long = pi_env.run_print([f"{log}\n\n{QUESTION}"], extensions=[SHIM])
    assert long.returncode == 0, long.stderr
    after_paste = _recalled(fake_model)
    fake_model.script(TextReply("Yes."))
    alone = pi_env.run_print([QUESTION], extensions=[SHIM])
    assert alone.returncode == 0, alone.stderr
    by_itself = _recalled(fake_model)
    assert FACTS[0] in by_itself
    # every earlier fact the question recalls alone, it recalls after the paste too
    assert [f for f in FACTS if f in after_paste] == [f for f in FACTS if f in by_itself]
