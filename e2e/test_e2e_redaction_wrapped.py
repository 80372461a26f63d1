"""Secrets wrapped onto the next lines (issue 26 item 2), through real `pi -p` turns: in the prompt,
in a tool's output and in the answer; then a turn whose recall finds them. No window of any of
them may be left in any file under the data dir (the store, its WAL and index, the outbox, the
recall traces, the logs)."""

from __future__ import annotations

import sys
from pathlib import Path

from bridge import SHIM, data_dir, stored_turns, use_bridge
from harness import FakeModel, PiEnv, TextReply

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from wrapped_secrets import survivors, wrapped_cases

CASES = wrapped_cases(seed=4711)


def _every_file(env: PiEnv) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(data_dir(env).rglob("*")) if p.is_file()
    )


def test_wrapped_secrets_are_redacted_whole_in_every_file(pi_env: PiEnv, fake_model: FakeModel) -> None:
    use_bridge(pi_env)
    aws = CASES[0]  # the case: the key id and the secret key each wrapped onto two lines
    creds = pi_env.work_dir / "credentials"
    creds.write_text(aws.text, encoding="utf-8")
    pasted = "\n\n".join(case.text for case in CASES[1:])
    fake_model.script(TextReply(f"zebracorn setup noted:\n{pasted}"))
    first = pi_env.run_print([f"my zebracorn setup, keep it in mind:\n{pasted}"], extensions=[SHIM])
    assert first.returncode == 0, first.stderr
    tool = pi_env.run_print(
        [f'zebracorn creds: CALL_TOOL bash {{"command": "cat {creds}"}}'], extensions=[SHIM]
    )
    assert tool.returncode == 0, tool.stderr
    assert aws.secrets[1][25:] in tool.stdout  # the tool really read it, the model saw it
    recall = pi_env.run_print(["what was my zebracorn setup?"], extensions=[SHIM])
    assert recall.returncode == 0, recall.stderr

    rows = stored_turns(pi_env)
    assert len(rows) == 3 and all("[REDACTED:" in row["user_text"] for row in rows[:1])
    assert (data_dir(pi_env) / "recall-traces.sqlite3").exists()
    everything = _every_file(pi_env)
    assert "zebracorn" in everything  # the turns are there, in their redacted form
    left = {case.name: survivors(case, everything) for case in CASES}
    assert not any(left.values()), {name: found for name, found in left.items() if found}
