"""Property tests for pi_memory_bridge.redact (hypothesis).

Secrets are drawn from their published formats with uniformly random bodies (what real
credentials look like), then embedded in arbitrary surrounding text.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_memory_bridge.redact import is_sensitive_key, redact_text, redact_value

pytestmark = pytest.mark.slow  # property tests over generated inputs

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"


def _body(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _jwt(rng: random.Random) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').decode().rstrip("=")
    claims = json.dumps({"sub": _body(rng, ALNUM, 10), "exp": rng.randrange(10**9, 2 * 10**9)})
    payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    return f"{header}.{payload}.{_body(rng, URLSAFE, 43)}"


# (template with {} for the secret, secret factory). The secret is what must disappear.
SECRET_FORMATS: list[tuple[str, Callable[[random.Random], str]]] = [
    ("{}", lambda rng: "ghp_" + _body(rng, ALNUM, 36)),
    ("{}", lambda rng: "github_pat_" + _body(rng, ALNUM + "_", 82)),
    ("{}", lambda rng: "glpat-" + _body(rng, URLSAFE, 20)),
    ("{}", lambda rng: "AKIA" + _body(rng, string.ascii_uppercase + "234567", 16)),
    ("{}", lambda rng: "sk-proj-" + _body(rng, URLSAFE, 64)),
    ("{}", lambda rng: "sk-ant-api03-" + _body(rng, URLSAFE, 93) + "AA"),
    ("{}", lambda rng: "sk-mem-" + _body(rng, URLSAFE, 32)),
    ("{}", lambda rng: "AIza" + _body(rng, URLSAFE, 35)),
    ("{}", lambda rng: "npm_" + _body(rng, ALNUM, 36)),
    ("{}", lambda rng: "hf_" + _body(rng, string.ascii_letters, 34)),
    ("{}", lambda rng: "sk_live_" + _body(rng, ALNUM, 24)),
    (
        "{}",
        lambda rng: (
            f"xoxb-{_body(rng, string.digits, 12)}-{_body(rng, string.digits, 12)}-{_body(rng, ALNUM, 24)}"
        ),
    ),
    ("{}", lambda rng: "pypi-AgEIcHlwaS5vcmc" + _body(rng, URLSAFE, 80)),
    ("{}", _jwt),
    ("postgres://app:{}@db.internal/app", lambda rng: _body(rng, ALNUM, 16)),
    ("Authorization: Bearer {}", lambda rng: _body(rng, ALNUM + "+/", 40)),
    ("password={}", lambda rng: _body(rng, ALNUM, 14)),
    ('"api_key": "{}"', lambda rng: _body(rng, ALNUM, 32)),
    ("aws_secret_access_key = {}", lambda rng: _body(rng, ALNUM + "/+", 39) + "Z"),
]

# Characters that separate a secret from its surroundings in practice.
SEPARATORS = [" ", "\n", "\t", '"', "'", "(", ")", ",", ";", "<", ">", "[", "]"]

# Any character but lone surrogates (not valid text).
printable = st.characters(exclude_categories=["Cs"])
surrounding_text = st.text(printable, max_size=60)
formats = st.sampled_from(range(len(SECRET_FORMATS)))
seeds = st.integers(min_value=0, max_value=2**32)


@st.composite
def texts_with_a_secret(draw: st.DrawFn) -> tuple[str, str]:
    template, make = SECRET_FORMATS[draw(formats)]
    secret = make(random.Random(draw(seeds)))
    left, right = draw(surrounding_text), draw(surrounding_text)
    before, after = draw(st.sampled_from(SEPARATORS)), draw(st.sampled_from(SEPARATORS))
    return f"{left}{before}{template.format(secret)}{after}{right}", secret


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(texts_with_a_secret())
def test_an_embedded_secret_never_survives(case: tuple[str, str]) -> None:
    text, secret = case
    assert secret not in redact_text(text).text


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(texts_with_a_secret())
def test_an_embedded_secret_never_survives_json_escaping(case: tuple[str, str]) -> None:
    text, secret = case
    assert secret not in redact_text(json.dumps({"content": text})).text


assignment_like = st.builds(
    lambda key, op, value: f"{key}{op}{value}",
    st.sampled_from(["password", "token", "api_key", "key", "max_tokens", "secret_name", "HEROKU", "x"]),
    st.sampled_from(["=", ": ", " = ", '": "', ",", " => "]),
    st.text(st.sampled_from(ALNUM + "_-+/=.:@$"), max_size=30),
)
any_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(surrounding_text, assignment_like), max_size=6).map(" ".join),
    texts_with_a_secret().map(lambda case: case[0]),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(any_text)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    twice = redact_text(once.text)
    assert twice.text == once.text
    assert twice.count == 0


SENSITIVE = ["password", "apiKey", "x-api-key", "Authorization", "client_secret", "access_token", "cookie"]
ORDINARY = ["name", "max_tokens", "input_tokens", "tokenizer", "secretary", "token_count", "author", "id"]
keys = st.sampled_from(SENSITIVE + ORDINARY)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(printable, max_size=20),
)
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=20,
)


def _holds_nothing(value: object) -> bool:
    return value is None or isinstance(value, bool) or value == ""


def _check_structure(before: object, after: object) -> None:
    if isinstance(before, dict):
        assert isinstance(after, dict)
        assert set(after) == set(before)
        for key, value in before.items():
            if is_sensitive_key(key):
                if _holds_nothing(value) or (isinstance(value, str) and value.startswith("[REDACTED:")):
                    assert after[key] == value
                else:
                    assert isinstance(after[key], str)
                    assert after[key].startswith("[REDACTED:")
            else:
                _check_structure(value, after[key])
    elif isinstance(before, list):
        assert isinstance(after, list)
        assert len(after) == len(before)
        for item_before, item_after in zip(before, after, strict=True):
            _check_structure(item_before, item_after)
    elif isinstance(before, str):
        assert after == redact_text(before).text
    else:
        assert after == before


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_like)
def test_redact_value_blanks_sensitive_keys_and_keeps_structure(value: object) -> None:
    redacted, count = redact_value(value)
    _check_structure(value, redacted)
    assert count >= 0
    assert redact_value(redacted)[0] == redacted
