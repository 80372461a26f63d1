"""Example-based tests for pi_memory_bridge.redact.

Every credential below is generated at run time from a seeded RNG (prefix + random body), so
the repository holds no real-looking secret.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import string
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from pi_memory_bridge.redact import MAX_DEPTH, Redacted, is_sensitive_key, redact_text, redact_value
from pi_memory_bridge.redact._engine import capture_free

RNG = random.Random(1234)
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def rand(alphabet: str, length: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(length))


def jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(json.dumps({"sub": rand(ALNUM, 8), "iat": 1700000000}).encode())
    return f"{header}.{payload.decode().rstrip('=')}.{rand(URLSAFE, 43)}"


def pem(label: str = "RSA PRIVATE KEY", lines: int = 8) -> str:
    body = "\n".join(rand(B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def check(text: str, secret: str, kind: str) -> Redacted:
    result = redact_text(text)
    assert secret not in result.text, result.text
    assert f"[REDACTED:{kind}]" in result.text, result.text
    assert kind in result.kinds
    assert result.count >= 1
    return result


# --- self-identifying tokens -----------------------------------------------------------------

TOKENS = [
    ("openai-key", lambda: "sk-proj-" + rand(URLSAFE, 48)),
    ("openai-key", lambda: "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20)),
    ("anthropic-key", lambda: "sk-ant-api03-" + rand(URLSAFE, 93) + "AA"),
    ("memorycore-key", lambda: "sk-mem-" + rand(URLSAFE, 32)),
    ("api-key", lambda: "sk-" + rand(ALNUM, 32)),
    ("google-api-key", lambda: "AIza" + rand(URLSAFE, 35)),
    ("groq-key", lambda: "gsk_" + rand(ALNUM, 52)),
    ("huggingface-token", lambda: "hf_" + rand(string.ascii_letters, 34)),
    ("stripe-key", lambda: "sk_live_" + rand(ALNUM, 24)),
    ("sendgrid-key", lambda: "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43)),
    ("twilio-key", lambda: "SK" + rand(HEX, 32)),
    ("github-token", lambda: "ghp_" + rand(ALNUM, 36)),
    ("github-token", lambda: "gho_" + rand(ALNUM, 36)),
    ("github-token", lambda: "ghu_" + rand(ALNUM, 36)),
    ("github-token", lambda: "ghs_" + rand(ALNUM, 36)),
    ("github-token", lambda: "ghr_" + rand(ALNUM, 36)),
    ("github-token", lambda: "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)),
    ("gitlab-token", lambda: "glpat-" + rand(URLSAFE, 20)),
    ("slack-token", lambda: f"xoxb-{rand('0123456789', 12)}-{rand('0123456789', 12)}-{rand(ALNUM, 24)}"),
    ("slack-token", lambda: f"xoxp-{rand('0123456789', 12)}-{rand('0123456789', 12)}-{rand(ALNUM, 32)}"),
    (
        "slack-webhook",
        lambda: f"hooks.slack.com/services/T{rand(ALNUM, 8)}/B{rand(ALNUM, 8)}/{rand(ALNUM, 24)}",
    ),
    ("npm-token", lambda: "npm_" + rand(ALNUM, 36)),
    ("pypi-token", lambda: "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 70)),
    ("aws-access-key-id", lambda: "AKIA" + rand(string.ascii_uppercase + "234567", 16)),
    ("aws-access-key-id", lambda: "ASIA" + rand(string.ascii_uppercase + "234567", 16)),
    ("jwt", jwt),
    ("digitalocean-token", lambda: "dop_v1_" + rand(HEX, 64)),
    ("vault-token", lambda: "hvs." + rand(URLSAFE, 90)),
    ("telegram-bot-token", lambda: f"{rand('0123456789', 10)}:AA{rand(URLSAFE, 33)}"),
]


@pytest.mark.parametrize(("kind", "make"), TOKENS, ids=[f"{kind}-{i}" for i, (kind, _) in enumerate(TOKENS)])
@pytest.mark.parametrize(
    "template",
    [
        "{}",
        "I pasted {} by mistake",
        'config: {{"value": "{}"}}',
        "line one\nVALUE={}\nline three",
        "log: request failed with {}; retrying",
        '{{"content": "loaded\\n{}\\n"}}',  # inside a JSON string, after an escaped newline
    ],
)
def test_self_identifying_tokens_are_replaced(kind: str, make: object, template: str) -> None:
    assert callable(make)
    secret = make()
    check(template.format(secret), secret, kind)


def test_placeholder_keeps_the_surrounding_text_readable() -> None:
    secret = "ghp_" + rand(ALNUM, 36)
    assert redact_text(f"export GITHUB_TOKEN={secret}").text == "export GITHUB_TOKEN=[REDACTED:github-token]"


def test_short_or_bare_prefixes_are_not_tokens() -> None:
    for text in ("sk-01", "eyJ", "AKIA", "ghp_", "xoxo-xoxo-xoxo", "task-list-for-the-quarterly-review"):
        assert redact_text(text).text == text


# --- AWS secret access keys ---------------------------------------------------------------------


def aws_secret() -> str:
    return rand(ALNUM + "/+", 38) + "A1"


@pytest.mark.parametrize(
    "template",
    [
        "aws_secret_access_key = {}",
        'AWS_SECRET_ACCESS_KEY="{}"',
        '{{"SecretAccessKey": "{}"}}',
        "AWS Secret Access Key [None]: {}",
        "AKIA" + "Q" * 4 + "234567ABCDEF" + ",{}",
    ],
)
def test_aws_secret_access_keys_are_replaced(template: str) -> None:
    secret = aws_secret()
    result = check(template.format(secret), secret, "aws-secret")
    assert "AKIAQQQQ" not in result.text


def test_aws_credentials_file_reports_both_kinds() -> None:
    key_id = "AKIA" + rand(string.ascii_uppercase + "234567", 16)
    text = f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {aws_secret()}\n"
    assert redact_text(text).kinds == ("aws-access-key-id", "aws-secret")


# --- blocks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label",
    ["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"],
)
def test_private_key_blocks_are_replaced_whole(label: str) -> None:
    block = pem(label)
    result = redact_text(f"before\n{block}\nafter")
    assert result.text == "before\n[REDACTED:private-key]\nafter"


def test_pgp_private_key_block() -> None:
    block = pem("PGP PRIVATE KEY BLOCK")
    assert redact_text(block).text == "[REDACTED:private-key]"


def test_private_key_inside_json_string() -> None:
    document = json.dumps({"type": "service_account", "private_key": pem("PRIVATE KEY") + "\n"})
    result = redact_text(document)
    assert "BEGIN" not in result.text
    assert json.loads(result.text)["type"] == "service_account"


def test_truncated_private_key_loses_its_body() -> None:
    body = rand(B64, 64)
    result = redact_text(f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body[:20]}")
    assert body[:20] not in result.text
    assert result.text == "[REDACTED:private-key]"


def test_certificates_and_public_keys_are_kept() -> None:
    for label in ("CERTIFICATE", "PUBLIC KEY"):
        block = pem(label)
        assert redact_text(block).text == block


def test_kubernetes_secret_data_is_replaced() -> None:
    value = base64.b64encode(rand(ALNUM, 24).encode()).decode()
    manifest = f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ndata:\n  api-token: {value}\n"
    result = check(manifest, value, "kubernetes-secret")
    assert "name: app" in result.text


def test_kubernetes_config_map_data_is_kept() -> None:
    manifest = "kind: ConfigMap\ndata:\n  settings: eyJsZXZlbCI6ICJpbmZvIn0=\n"
    assert redact_text(manifest).text == manifest


# --- HTTP auth, URLs, command lines ---------------------------------------------------------------


def test_bearer_token_is_replaced_including_base64_tail() -> None:
    token = rand(ALNUM, 30) + "+/=="
    result = check(f"Authorization: Bearer {token}", token, "bearer-token")
    assert result.text == "Authorization: Bearer [REDACTED:bearer-token]"


def test_bearer_outside_a_header() -> None:
    token = rand(ALNUM, 40)
    check(f"then call it with bearer {token} and see", token, "bearer-token")


def test_basic_auth_is_replaced() -> None:
    encoded = base64.b64encode(f"deploy:{rand(ALNUM, 16)}".encode()).decode()
    check(f'curl -H "Authorization: Basic {encoded}" https://example.com', encoded, "basic-auth")
    check(f"header was Basic {encoded}", encoded, "basic-auth")


def test_authorization_without_scheme_and_cookies() -> None:
    token = rand(ALNUM, 32)
    check(f"authorization: {token}", token, "authorization")
    session = rand(ALNUM, 32)
    result = check(f"Cookie: theme=dark; session={session}", session, "cookie")
    assert result.text == "Cookie: [REDACTED:cookie]"
    check(f"Set-Cookie: sid={session}; Path=/; HttpOnly", session, "cookie")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgres://app:{pw}@db.internal:5432/app",
            "postgres://app:[REDACTED:password]@db.internal:5432/app",
        ),
        ("redis://:{pw}@cache:6379/0", "redis://:[REDACTED:password]@cache:6379/0"),
        (
            "https://x-access-token:{pw}@github.com/o/r.git",
            "https://x-access-token:[REDACTED:password]@github.com/o/r.git",
        ),
    ],
)
def test_url_passwords_are_replaced_and_user_kept(url: str, expected: str) -> None:
    password = rand(ALNUM, 20)
    assert redact_text(url.format(pw=password)).text == expected


def test_url_with_token_as_user() -> None:
    token = rand(ALNUM, 32)
    check(f"https://{token}@o123.ingest.example.io/42", token, "url-credential")


def test_curl_user_and_header_options() -> None:
    password = rand(ALNUM, 16)
    check(f"curl -u admin:{password} https://example.com", password, "credential")
    key = "sk_test_" + rand(ALNUM, 24)
    check(f"curl https://api.example.com -u {key}:", key, "stripe-key")
    api_key = rand(ALNUM, 32)
    check(f"curl -H 'X-Api-Key: {api_key}' https://example.com", api_key, "api-key")
    check(f'wget --header="Private-Token: {api_key}" https://example.com', api_key, "token")


def test_cli_password_flag() -> None:
    password = rand(ALNUM, 14) + "!"
    check(f"mysqladmin --password {password} status", password, "password")
    check(f"tool --api-key '{password}' run", password, "api-key")


def test_sql_passwords() -> None:
    password = rand(ALNUM, 14)
    check(f"CREATE USER app IDENTIFIED BY '{password}';", password, "password")
    check(f"ALTER ROLE app WITH PASSWORD '{password}';", password, "password")


def test_markup_passwords() -> None:
    password = rand(ALNUM, 14)
    check(f"<server><password>{password}</password></server>", password, "password")
    check(f'<add key="ClearTextPassword" value="{password}" />', password, "password")


# --- assignments --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("PASSWORD={}", "password"),
        ("export DB_PASSWORD={}", "password"),
        ('export DB_PASSWORD="{}"', "password"),
        ("password: {}", "password"),
        ('"password": "{}"', "password"),
        ("'passwd' => '{}',", "password"),
        ("api_key = '{}'", "api-key"),
        ("apiKey: {}", "api-key"),
        ("X-API-KEY: {}", "api-key"),
        ("client_secret={}", "secret"),
        ('{{"access_token":"{}","token_type":"Bearer"}}', "token"),
        ("refresh_token := {}", "token"),
        ("?access_token={}&page=2", "token"),
        ("credentials = {}", "credential"),
        ("private_key: {}", "private-key"),
        ("SECRET_KEY ?= {}", "secret-key"),
        ("spring.datasource.password={}", "password"),
        ("Server=db;User Id=app;Password={};", "password"),
        ('{{\\"password\\": \\"{}\\"}}', "password"),  # JSON inside a JSON string
        ("密码：{}", "password"),
        ("令牌 = {}", "token"),
        ("BUNDLE_GEMS__EXAMPLE__COM={}", "credential"),
    ],
)
def test_assignments_to_credential_names(template: str, kind: str) -> None:
    value = rand(ALNUM, 12) + "7"
    check(template.format(value), value, kind)


def test_plain_password_on_its_own_yaml_line() -> None:
    check("database:\n  password: hunter\n  host: db\n", "hunter", "password")


def test_service_named_keys_with_id_like_values() -> None:
    heroku = str(uuid.UUID(int=RNG.getrandbits(128)))
    check(f"HEROKU={heroku}", heroku, "secret")
    sentry = rand(HEX, 64)
    check(f'sentry = "{sentry}"', sentry, "secret")


def test_weak_names_need_random_values() -> None:
    value = rand(ALNUM, 24) + "9"
    check(f"monkey_key_thing = {value}", value, "secret")
    assert redact_text("monkey = banana-split-2").count == 0


@pytest.mark.parametrize(
    "text",
    [
        "password: str",
        "def login(username: str, password: str, token: Optional[str] = None) -> None:",
        "client = Client(api_key=api_key, timeout=30)",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "password = getpass.getpass()",
        'headers = {"Authorization": f"Bearer {token}"}',
        "const apiKey: string = process.env.API_KEY!;",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "PASSWORD=${DB_PASSWORD}",
        "OPENAI_API_KEY=<your-key>",
        "export OPENAI_API_KEY=sk-...",
        "password: ********",
        "password=",
        '"password": ""',
        '"password": null',
        "API_TOKEN=changeme",
        "max_tokens: 1024",
        "token_count = 42",
        "secret_name: app-secrets",
        "password_min_length: 12",
        '"token_type": "Bearer"',
        'fields = ["username", "password", "password_confirmation"]',
        "private_key_path: ~/.ssh/id_ed25519",
        "Password: must be at least 12 characters",
        "id-token: write",
    ],
)
def test_code_references_and_placeholders_are_not_secrets(text: str) -> None:
    assert redact_text(text).text == text


# --- no false positives on ordinary text ---------------------------------------------------------


ORDINARY = [
    "The tokenizer splits text into tokens and max_tokens caps the output.",
    "Reset your password from the settings page; the secretary filed the report.",
    "A bearer of good news. Basic usage: run with --help.",
    "请不要把密码写进代码里，应该使用环境变量或者密钥管理服务。令牌会在一小时后过期。",
    "import os\nfrom typing import Optional\n\n\ndef tokenize(text: str) -> list[str]:\n"
    "    return text.split()\n",
    "func Load() (*Config, error) {\n\ttoken, err := fetchToken(ctx, cfg.TokenURL)\n"
    '\treq.Header.Set("Authorization", "Bearer "+token)\n}',
    "python 3.11.9, node v20.12.2, pydantic==2.7.1, 1.0.0-rc.1+build.5",
    "/home/dev/app/src/main.py C:\\Users\\dev\\app.log ./node_modules/.bin/tsc",
    "https://github.com/example/app/pull/123 http://localhost:8080/api/v1/items?page=2&limit=50",
    "git@github.com:example/app.git ssh://git@github.com/example/app.git",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk3d2Ln8u0sPq1vWb9aXyZ dev@laptop",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_unchanged(text: str) -> None:
    result = redact_text(text)
    assert result == Redacted(text, 0, ())


def test_hashes_ids_and_blobs_are_unchanged() -> None:
    shas = [rand(HEX, 40) for _ in range(20)]
    uuids = [str(uuid.UUID(int=RNG.getrandbits(128), version=4)) for _ in range(20)]
    sha256 = [rand(HEX, 64) for _ in range(20)]
    blob = base64.b64encode(RNG.randbytes(30_000)).decode()
    texts = [
        "\n".join(f"commit {sha}" for sha in shas),
        json.dumps([{"sha": sha, "parents": [{"sha": other}]} for sha, other in itertools.pairwise(shas)]),
        "\n".join(f'{{"id": "{u}", "request_id": "{u}"}}' for u in uuids),
        "\n".join(f"{digest}  dist/app.tar.gz\nimage@sha256:{digest}" for digest in sha256),
        f"data:image/png;base64,{blob}",
        "\n".join(blob[i : i + 76] for i in range(0, 20_000, 76)),
    ]
    for text in texts:
        assert redact_text(text).count == 0


# --- key names ---------------------------------------------------------------------------------

SENSITIVE_NAMES = """
    password passwd PASSWORD db_password DbPassword api_key apiKey APIKey x-api-key X-Api-Key Authorization
    proxy-authorization client_secret clientSecret access_token accessToken refresh_token id_token private_key
    privateKey cookie set-cookie Cookie credentials creds aws_secret_access_key SecretAccessKey secret token
    auth github_token session_token passphrase 密码 mysql.password SEcReT_Key ClearTextPassword
""".split()
NON_SENSITIVE_NAMES = [
    *"""
    max_tokens input_tokens output_tokens maxTokens tokenizer secretary token_count author authority keyboard
    key sort_key primary_key cache_key public_key publishable_key password_policy secret_name token_type
    token_url api_key_header private_key_path session_id pwd pass passport password_hash has_password
    is_secret next_token eos_token credentials_file cookie_domain authentication name
    """.split(),
    "",
]


@pytest.mark.parametrize("name", SENSITIVE_NAMES)
def test_sensitive_key_names(name: str) -> None:
    assert is_sensitive_key(name)


@pytest.mark.parametrize("name", NON_SENSITIVE_NAMES)
def test_non_sensitive_key_names(name: str) -> None:
    assert not is_sensitive_key(name)


# --- structural redaction -------------------------------------------------------------------------


def test_redact_value_blanks_sensitive_keys_wholesale() -> None:
    secret = rand(ALNUM, 20)
    value = {
        "password": secret,
        "apiKey": 12345,
        "credentials": {"user": "alice", "pass": secret},
        "cookies": [secret, secret],
        "max_tokens": 1024,
        "input_tokens": 12,
        "tokenizer": "cl100k",
        "author": "alice",
        "nested": [{"Authorization": f"Bearer {secret}"}, {"note": "keep me"}],
    }
    redacted, count = redact_value(value)
    assert redacted == {
        "password": "[REDACTED:password]",
        "apiKey": "[REDACTED:api-key]",
        "credentials": "[REDACTED:credential]",
        "cookies": "[REDACTED:cookie]",
        "max_tokens": 1024,
        "input_tokens": 12,
        "tokenizer": "cl100k",
        "author": "alice",
        "nested": [{"Authorization": "[REDACTED:authorization]"}, {"note": "keep me"}],
    }
    assert count == 5


def test_redact_value_keeps_values_that_hold_nothing() -> None:
    value = {"password": None, "token": "", "secret": True, "api_key": "[REDACTED:api-key]"}
    assert redact_value(value) == (value, 0)


def test_redact_value_redacts_strings_at_any_depth() -> None:
    secret = "ghp_" + rand(ALNUM, 36)
    value = {"a": [{"b": (f"use {secret}", 3.5, None)}], "c": f"export TOKEN={secret}"}
    redacted, count = redact_value(value)
    assert redacted == {
        "a": [{"b": ("use [REDACTED:github-token]", 3.5, None)}],
        "c": "export TOKEN=[REDACTED:github-token]",
    }
    assert count == 2


def test_redact_value_redacts_secrets_in_keys() -> None:
    secret = "ghp_" + rand(ALNUM, 36)
    redacted, count = redact_value({secret: 1, 2: "two"})
    assert redacted == {"[REDACTED:github-token]": 1, 2: "two"}
    assert count == 1


def test_redact_value_caps_depth() -> None:
    value: object = "leaf"
    for _ in range(MAX_DEPTH + 5):
        value = [value]
    redacted, _ = redact_value(value)
    depth = 0
    while isinstance(redacted, list):
        redacted = redacted[0]
        depth += 1
    assert depth == MAX_DEPTH
    assert redacted == "[REDACTED:max-depth]"


def test_redact_value_handles_cycles() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    redacted, _ = redact_value(cycle)
    assert isinstance(redacted, list)


def test_redact_value_scalars() -> None:
    assert redact_value(None) == (None, 0)
    assert redact_value(7) == (7, 0)
    assert redact_value(True) == (True, 0)
    assert redact_value("plain") == ("plain", 0)


# --- result shape, idempotence, unicode -------------------------------------------------------------


def test_counts_and_sorted_kinds() -> None:
    text = f"b=ghp_{rand(ALNUM, 36)} a=AKIA{rand(string.ascii_uppercase, 16)} c=ghp_{rand(ALNUM, 36)}"
    result = redact_text(text)
    assert result.count == 3
    assert result.kinds == ("aws-access-key-id", "github-token")


def test_empty_and_placeholder_text() -> None:
    assert redact_text("") == Redacted("", 0, ())
    already = "token=[REDACTED:token] and [REDACTED:github-token] and password: [REDACTED:password]"
    assert redact_text(already) == Redacted(already, 0, ())


def test_redaction_is_idempotent_on_examples() -> None:
    text = "\n".join(
        [
            f"export OPENAI_API_KEY=sk-proj-{rand(URLSAFE, 40)}",
            f"postgres://app:{rand(ALNUM, 12)}@db/app",
            f'{{"password": "{rand(ALNUM, 10)} {rand(ALNUM, 4)}", "token": "ghp_{rand(ALNUM, 36)}"}}',
            pem(),
            f"Authorization: Bearer {rand(ALNUM, 30)}",
        ]
    )
    once = redact_text(text)
    twice = redact_text(once.text)
    assert twice == Redacted(once.text, 0, ())


def test_offsets_are_right_after_multibyte_text() -> None:
    secret = "ghp_" + rand(ALNUM, 36)
    text = f"日本語のテキスト 😀 {secret} 然后 password=hunter2x 结束"
    assert (
        redact_text(text).text
        == "日本語のテキスト 😀 [REDACTED:github-token] 然后 password=[REDACTED:password] 结束"
    )


def test_lone_surrogates_do_not_break_redaction() -> None:
    secret = "ghp_" + rand(ALNUM, 36)
    result = redact_text(f"\ud800 {secret}")
    assert secret not in result.text
    assert result.text == "\ufffd [REDACTED:github-token]"  # no lone surrogate comes out
    assert redact_text("plain \udfff text").text == "plain \ufffd text"


# --- linear time ---------------------------------------------------------------------------------

MEGABYTE = 1_000_000


def _fill(unit: str) -> str:
    return (unit * (MEGABYTE // len(unit) + 1))[:MEGABYTE]


@pytest.mark.parametrize(
    "text",
    [
        "a" * MEGABYTE,
        _fill("sk-"),
        "=" * MEGABYTE,
        base64.b64encode(random.Random(5).randbytes(MEGABYTE * 3 // 4)).decode(),
        _fill("-----BEGIN RSA PRIVATE KEY-----\n"),
        _fill("password: "),
        _fill('"api_key":"'),
        "password=" + _fill("1."),
        _fill("密码：a1 "),
    ],
    ids=["a", "sk-", "equals", "base64", "begin-without-end", "password-colon", "json-key", "dots", "cjk"],
)
def test_one_megabyte_adversarial_input_is_redacted_in_bounded_time(text: str) -> None:
    # RE2 keeps this linear; the time it takes is measured in bench/bench_bounds.py (and
    # bench/bench_redaction.py), and a catastrophic backtrack would hit the test timeout
    result = redact_text(text)
    assert len(result.text) <= len(text) + 64 * (result.count + 1)


def test_concurrent_calls_agree_with_sequential_ones() -> None:
    texts = [
        f"password: hunter{i}\nHEROKU={uuid.UUID(int=RNG.getrandbits(128))}\n"
        f"ghp_{rand(ALNUM, 36)} x{i}: plain"
        for i in range(40)
    ]
    expected = [redact_text(text) for text in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(redact_text, texts * 5)) == expected * 5


def test_capture_free_patterns_keep_escapes_and_classes() -> None:
    pattern = r"(?i)(?P<key>a(b)(?:c))\((?P<x>d)\)[(]x[^]()](e)"
    assert capture_free(pattern) == r"(?i)(?:a(?:b)(?:c))\((?:d)\)[(]x[^]()](?:e)"


def test_a_decision_that_read_past_its_memo_window_is_not_reused_for_the_same_candidate() -> None:
    # the same bytes around both candidates, but only the second is alone on its line: the first
    # one's "keep it" looked at its whole line, so it must not be remembered for the second
    text = "Set password: hunterz\nok ok\n  password: hunterz\nok ok\n"
    assert redact_text(text).text == "Set password: hunterz\nok ok\n  password: [REDACTED:password]\nok ok\n"
