"""Real-world shapes of secrets: split across lines, base64-wrapped PEM keys, hex, plain language.

Every credential is generated at run time from a seeded RNG, so the repository holds none.
"""

from __future__ import annotations

import base64
import json
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_memory_bridge.redact import redact_text

RNG = random.Random(4242)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


def rand(alphabet: str, length: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(length))


def aws_key_id() -> str:
    return "AKIA" + rand(UPPER_DIGITS, 16)


def github_token() -> str:
    return "ghp_" + rand(ALNUM, 36)


def pem(label: str = "RSA PRIVATE KEY") -> str:
    body = "\n".join(rand(ALNUM + "+/", 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def leaked(secret: str, output: str, width: int = 8) -> bool:
    """Does any `width`-character window of the secret survive?"""
    return any(secret[i : i + width] in output for i in range(len(secret) - width + 1))


# --- split across lines -----------------------------------------------------------------------------


@pytest.mark.parametrize("make", [aws_key_id, github_token])
@pytest.mark.parametrize(
    "joint",
    ["\n", "\r\n", "\n    ", " \n", "\\n"],
    ids=["lf", "crlf", "indent", "trailing-blank", "json-escape"],
)
def test_a_token_split_across_two_lines_is_redacted_whole(make, joint: str) -> None:  # type: ignore[no-untyped-def]
    token = make()
    for cut in (5, 10, len(token) - 3):
        text = f"here it is: {token[:cut]}{joint}{token[cut:]} -- rotate it"
        out = redact_text(text).text
        assert not leaked(token[:cut], out, min(8, cut)) and not leaked(
            token[cut:], out, min(8, len(token) - cut)
        )
        assert out.endswith(" -- rotate it") and "[REDACTED:" in out


def test_fine_grained_github_token_wrapped_over_three_lines() -> None:
    token = "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)
    text = "GH_TOKEN\n" + "\n".join(token[i : i + 40] for i in range(0, len(token), 40)) + "\nnext line"
    out = redact_text(text).text
    assert out == "GH_TOKEN\n[REDACTED:github-token]\nnext line"


def test_space_separated_groups_of_a_fixed_length_token() -> None:
    key_id = aws_key_id()
    grouped = " ".join(key_id[i : i + 4] for i in range(0, 20, 4))
    out = redact_text(f"the key id is {grouped} and it is active").text
    assert out == "the key id is [REDACTED:aws-access-key-id] and it is active"


def test_a_complete_token_does_not_swallow_the_next_line() -> None:
    token = github_token()
    out = redact_text(f"{token}\nREADME updated").text
    assert out == "[REDACTED:github-token]\nREADME updated"


def test_prefix_words_on_their_own_are_left_alone() -> None:
    for text in (
        "GitHub tokens start with ghp_\nand AWS ids with AKIA\nnever commit them",
        "AKIA is a prefix",
    ):
        assert redact_text(text).text == text


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(min_value=4, max_value=39), width=st.sampled_from(["\n", "\r\n", "\\n", "\n\t"]))
def test_any_cut_of_a_github_token_is_redacted(cut: int, width: str) -> None:
    token = "ghp_" + "".join(random.Random(cut).choice(ALNUM) for _ in range(36))
    out = redact_text(f'"{token[:cut]}{width}{token[cut:]}"').text
    assert out == '"[REDACTED:github-token]"'


# --- base64-wrapped PEM keys ----------------------------------------------------------------------


@pytest.mark.parametrize("label", ["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
def test_base64_of_a_pem_private_key_is_redacted(label: str) -> None:
    encoded = base64.b64encode(pem(label).encode()).decode()
    for text in (
        f"data:\n  tls.key: {encoded}\n",
        f"PRIVATE_VALUE={encoded}",
        json.dumps({"value": encoded}),
        "value: " + "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76)) + "\nkind: x",
    ):
        out = redact_text(text).text
        assert not leaked(encoded[20:], out, 12), out
        assert "[REDACTED:private-key]" in out


def test_base64_of_a_certificate_or_public_key_is_not_a_secret() -> None:
    for label in ("CERTIFICATE", "PUBLIC KEY"):
        block = f"-----BEGIN {label}-----\n" + rand(ALNUM, 64) + f"\n-----END {label}-----\n"
        text = "ca.crt: " + base64.b64encode(block.encode()).decode()
        assert redact_text(text).text == text


# --- hex -----------------------------------------------------------------------------------------------


def test_hex_key_material_after_a_key_name() -> None:
    key = rand("0123456789abcdef", 64)
    cases = [
        f"private key: {key}",
        f"the signing key is 0x{key}",
        "AES-256 key: " + " ".join(key[i : i + 2] for i in range(0, 64, 2)),
        "hmac key = " + ":".join(key[i : i + 2] for i in range(0, 64, 2)),
        "encryption key " + " ".join(key[i : i + 8] for i in range(0, 64, 8)),
        f"私钥：{key}",
    ]
    for text in cases:
        out = redact_text(text).text
        assert not leaked(key.replace(" ", ""), out.replace(" ", "").replace(":", ""), 10), out
        assert "[REDACTED:" in out


def test_hex_that_is_not_a_key_stays() -> None:
    digest = rand("0123456789abcdef", 64)
    for text in (
        f"sha256: {digest}",
        f"{digest}  dist/app.tar.gz",
        f"signing key fingerprint: {':'.join(digest[i : i + 2] for i in range(0, 40, 2))}",
        f"the public key is {digest}",
        "seed: " + "0" * 64,
        "master key: " + "deadbeef" * 8,
        f"commit {digest[:40]}",
    ):
        assert redact_text(text).text == text


def test_a_token_written_in_hex_is_redacted() -> None:
    token = github_token()
    raw = token.encode()
    for text in (
        f"payload={raw.hex()}",
        "bytes: " + " ".join(f"{b:02x}" for b in raw),
        'b"' + "".join(f"\\x{b:02x}" for b in raw) + '"',
    ):
        out = redact_text(text).text
        assert raw.hex()[:16] not in out.replace(" ", "").replace("\\x", ""), out
        assert "[REDACTED:github-token]" in out


# --- plain language -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "secret"),
    [
        ("my password is {}", "Hunter2x!"),
        ("My password is {} for the record", "t0ps3cret"),
        ("the wifi password for the office is '{}'", "c0ffee house 24"),
        ('the db password is now "{}"', "s3cret pass"),
        ("password was {}.", "Summer2024"),
        ("the PIN code is {}", "482913"),
        ("数据库密码是 {}", "Abc12345"),
        ("我的密码是：{}", "abc123456"),
        ("密码为{}，别告诉别人", "Zx9@secure"),
        ("管理员密码改成了 {}", "NewPass#88"),
        ("pw: {}", "Tr0ub4dor9"),
        ("login pwd: {}", "Tr0ub4dor9"),
        ("db_pw={}", "Tr0ub4dor9"),
    ],
)
def test_passwords_said_in_plain_language(template: str, secret: str) -> None:
    out = redact_text(template.format(secret)).text
    assert secret not in out and "[REDACTED:password]" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "the password field is required",
        "reset your password",
        "your password is incorrect",
        "my password is the same as before",
        "the password is hashed with bcrypt",
        "password: str",
        "password: str | None = None",
        "if password is None:",
        "assert password is not None",
        "the password is stored in the vault",
        "the password will be emailed to you",
        "密码是必填项",
        "密码是正确的，但账号被锁定了",
        "密码为空时登录表单会提示错误",
        "pwd: /home/dev/project",
        "pw = sync_playwright().start()",
        "the reset pin is GPIO4",
        "the password is ********",
        "my password is <your-password>",
    ],
)
def test_ordinary_prose_and_code_about_passwords_is_left_alone(text: str) -> None:
    assert redact_text(text).text == text


def test_new_rules_are_idempotent() -> None:
    token = github_token()
    text = (
        f"split {token[:12]}\n{token[12:]}; my password is Hunter2x!; 密码是 Abc12345; "
        f"key: {base64.b64encode(pem().encode()).decode()}; private key: {rand('0123456789abcdef', 64)}"
    )
    once = redact_text(text)
    twice = redact_text(once.text)
    assert twice.text == once.text and twice.count == 0
    assert once.count == 5, once
