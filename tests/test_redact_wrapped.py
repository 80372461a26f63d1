"""Secrets a terminal, an editor or a mail client wrapped onto the next lines (issue 26 item 2):
caught as a whole; ordinary multi-line text, alone or after a secret, left as it was."""

from __future__ import annotations

import pytest

from pi_memory_bridge.redact import redact_text, redact_value
from wrapped_secrets import KeptCase, WrappedCase, kept_cases, survivors, wrapped_cases

WRAPPED = wrapped_cases()
KEPT = kept_cases()


def test_the_set_is_large_enough() -> None:
    assert len(WRAPPED) >= 21 and len(KEPT) >= 20


@pytest.mark.parametrize("case", WRAPPED, ids=[case.name for case in WRAPPED])
def test_a_wrapped_secret_is_redacted_whole(case: WrappedCase) -> None:
    out = redact_text(case.text).text
    assert not survivors(case, out), out
    assert redact_text(out).text == out  # idempotent


@pytest.mark.parametrize("case", WRAPPED[:6], ids=[case.name for case in WRAPPED[:6]])
def test_a_wrapped_secret_in_a_json_value_is_redacted_whole(case: WrappedCase) -> None:
    value, _ = redact_value({"messages": [{"content": case.text}]})
    assert not survivors(case, repr(value))


@pytest.mark.parametrize("case", KEPT, ids=[case.name for case in KEPT])
def test_ordinary_multi_line_text_stays(case: KeptCase) -> None:
    out = redact_text(case.text).text
    for kept in case.kept:
        assert kept in out, out
    if case.name.startswith("ordinary"):
        assert out == case.text


def test_the_same_line_is_decided_by_what_follows_it_each_time() -> None:
    # both values become the same placeholder: the line below is the same, what follows it is not
    first, second = "Zq7" + "x" * 20 + "9Kp2Lm", "Wv4" + "y" * 20 + "3Nc8Rt"
    text = f"api_key = {first}\nAb12Cd34Ef: yes\napi_key = {second}\nAb12Cd34Ef\n"
    out = redact_text(text).text
    assert out == "api_key = [REDACTED:api-key]\nAb12Cd34Ef: yes\napi_key = [REDACTED:api-key]\n"
