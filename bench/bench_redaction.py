"""Measure the redactor: recall against gitleaks' rule set, false positives, linear time.

Run: .venv/bin/python bench/bench_redaction.py [--samples N] [--verbose]

Recall. For every gitleaks rule with a regex, hypothesis generates strings the rule's regex
fully matches (printable ASCII; fixed seed). A sample counts only if gitleaks itself would report
it: keyword present, entropy above the rule's threshold, generic rules need a digit, and neither
the global nor the rule's allowlists (regexes, stopwords) clear it. "The secret" is what gitleaks
reports: the rule's secretGroup, else the first non-empty capture group, else the whole match
(for kubernetes-secret-yaml the data item's name is dropped: it is not secret). Secrets under
2 bits of entropy per character (hypothesis' minimal examples such as "0000...") are skipped. Each sample is
embedded in five surroundings (prose, JSON string, .env line, shell export, log line) and
redacted; the secret "survives" if any window of it (max(8, len/3) characters, the whole secret
if shorter) is still in the output and does not occur elsewhere in the input (surrounding text or
the rest of the sample). A rule is "fully
redacted" when no secret of any sample survives in any surrounding.

False positives. An ordinary corpus (English and Chinese prose, Python/Go/TypeScript, configs,
git output, SHAs, UUIDs, base64 blobs, hashes, versions, paths, URLs, public keys and
certificates) must produce no placeholder at all.

Real-world shapes (issue 13). Seeded samples of what gitleaks' rules do not describe: vendor
tokens split across lines or into space-separated groups, base64-wrapped PEM private keys, raw
hex key material after a key name (continuous, 0x, bytes separated by spaces or colons, groups),
tokens written in hex, and passwords said in plain language in English and Chinese. Detection
rate per kind: a sample is detected when no 8-character window of its secret survives.

False positives, larger corpus. `ordinary_corpus.py`: a few hundred samples of prose and code in
English and Chinese that talk about passwords, keys and tokens without holding one; the rate is
the share of samples changed at all, per group.

Timing. 1 MB adversarial strings (long runs, repeated prefixes, unterminated key blocks, and the
new rules' prefixes) and throughput on the ordinary corpus, side by side with a baseline run of
the rules as they were before the new kinds (same process, same input).

The rule file is data to measure against (corpus/README.md); nothing from it is used by the
redactor.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import math
import random
import re
import sys
import time
import tomllib
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from ordinary_corpus import ordinary_samples

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pi_memory_bridge import redact as redact_module
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.redact._engine import Tally, decode_text, encode_text
from wrapped_secrets import kept_cases, wrapped_cases

RULES_FILE = Path("/work/shared/corpus/gitleaks-rules.toml")
SEED = 20240501
# hypothesis' first examples are minimal ("00000000-0000-...", "live_0000..."); rules without an
# entropy threshold would report them, but no credential has under 2 bits per character.
MIN_SECRET_ENTROPY = 2.0
ASCII_PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.just("\t")


# --- gitleaks rules as data ------------------------------------------------------------------


def go_regex_to_python(pattern: str) -> str:
    """Rewrite Go/RE2 syntax that stdlib re lacks or reads differently.

    ``\\z`` is ``\\Z`` in Python; ``[[:alnum:]]`` is a POSIX class; a ``(?i)`` in the middle of a
    pattern applies, in Go, to the rest of its enclosing group, which Python spells ``(?i:...)``.
    """
    pattern = pattern.replace(r"\z", r"\Z").replace("[[:alnum:]]", "[a-zA-Z0-9]")
    out: list[str] = []
    open_groups: list[int] = []  # per open group: number of (?i: wrappers to close with it
    top_level_wrappers = 0
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
        elif char == "[":
            end = index + 1
            if pattern[end : end + 1] == "^":
                end += 1
            if pattern[end : end + 1] == "]":
                end += 1
            while pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            out.append(pattern[index : end + 1])
            index = end + 1
        elif pattern.startswith("(?i)", index) and index > 0:
            out.append("(?i:")
            if open_groups:
                open_groups[-1] += 1
            else:
                top_level_wrappers += 1
            index += 4
        elif char == "(":
            open_groups.append(0)
            out.append(char)
            index += 1
        elif char == ")":
            out.append(")" * open_groups.pop() + ")")
            index += 1
        else:
            out.append(char)
            index += 1
    out.append(")" * top_level_wrappers)
    return "".join(out)


def shannon_entropy(value: str) -> float:
    if not value:
        return 0.0
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


@dataclass
class Allowlist:
    regexes: list[re.Pattern[str]]
    stopwords: list[str]
    target: str  # "secret", "match" or "line"

    def clears(self, secret: str, match: str) -> bool:
        subject = secret if self.target == "secret" else match
        if any(regex.search(subject) for regex in self.regexes):
            return True
        return any(word in secret.lower() for word in self.stopwords)


@dataclass
class GitleaksRule:
    id: str
    regex: re.Pattern[str]
    python_pattern: str
    secret_group: int
    entropy: float
    keywords: list[str]
    allowlists: list[Allowlist]

    def secret_of(self, sample: str) -> str | None:
        match = self.regex.search(sample)
        if match is None:
            return None
        if self.secret_group:
            return match.group(self.secret_group) or ""
        return next((group for group in match.groups() if group), match.group(0))

    def reports(self, sample: str, global_allowlist: Allowlist) -> str | None:
        """The secret gitleaks would report for ``sample`` (the part to check for), or None."""
        secret = self.secret_of(sample)
        if not secret or shannon_entropy(secret) < MIN_SECRET_ENTROPY:
            return None  # "0000...", "b_0000...": placeholders, not credentials
        if self.keywords and not any(keyword in sample.lower() for keyword in self.keywords):
            return None
        if self.entropy and shannon_entropy(secret) <= self.entropy:
            return None
        if self.id.startswith("generic") and not any(char.isdigit() for char in secret):
            return None
        if global_allowlist.clears(secret, sample):
            return None
        if any(allowlist.clears(secret, sample) for allowlist in self.allowlists):
            return None
        if self.id == "kubernetes-secret-yaml":
            # gitleaks reports "name: value"; the item name is not secret.
            return re.sub(r"^[\w.-]+:(?:[ \t]*(?:\||>[-+]?)\s+)?[ \t]*", "", secret)
        return secret


def _allowlist(data: dict[str, Any]) -> Allowlist | None:
    if data.get("condition") == "AND" and data.get("paths"):
        return None  # only applies to specific files; our samples have no path
    regexes = [re.compile(go_regex_to_python(regex)) for regex in data.get("regexes", [])]
    stopwords = [word.lower() for word in data.get("stopwords", [])]
    if not regexes and not stopwords:
        return None
    return Allowlist(regexes, stopwords, data.get("regexTarget", "secret"))


def load_rules() -> tuple[list[GitleaksRule], Allowlist, int]:
    config = tomllib.loads(RULES_FILE.read_text())
    global_allowlist = _allowlist(config["allowlist"]) or Allowlist([], [], "secret")
    rules: list[GitleaksRule] = []
    without_regex = 0
    for raw in config["rules"]:
        if "regex" not in raw:
            without_regex += 1
            continue
        python_pattern = go_regex_to_python(raw["regex"])
        allowlists = [allow for allow in map(_allowlist, raw.get("allowlists", [])) if allow]
        rules.append(
            GitleaksRule(
                id=raw["id"],
                regex=re.compile(python_pattern),
                python_pattern=python_pattern,
                secret_group=raw.get("secretGroup", 0),
                entropy=raw.get("entropy", 0.0),
                keywords=[keyword.lower() for keyword in raw.get("keywords", [])],
                allowlists=allowlists,
            )
        )
    return rules, global_allowlist, without_regex


def _generator_pattern(rule: GitleaksRule) -> str:
    """The rule's pattern with keyword dots made literal ("hooks.slack.com" is written with
    wildcard dots, so random samples almost never contain the keyword). Samples of the narrowed
    pattern still match the rule's own regex."""
    pattern = rule.python_pattern
    for keyword in rule.keywords:
        pieces = keyword.split(".")
        for left, right in itertools.pairwise(pieces):
            joint = f"{left[-3:]}.{right[:3]}"
            pattern = re.sub(re.escape(joint), joint.replace(".", r"\\."), pattern, flags=re.IGNORECASE)
    return pattern


def generate_samples(rule: GitleaksRule, wanted: int, global_allowlist: Allowlist) -> list[tuple[str, str]]:
    """Up to ``wanted`` (sample, secret) pairs gitleaks would report, deterministic per rule.

    Some rules' keywords live outside the match (facebook-access-token needs "facebook"
    somewhere in the file); when no sample can carry a keyword, samples get it as a prefix, as a
    real finding would have it nearby.
    """
    return _generate(rule, wanted, global_allowlist, "") or _generate(
        rule, wanted, global_allowlist, f"{rule.keywords[0]}: " if rule.keywords else ""
    )


def _generate(
    rule: GitleaksRule, wanted: int, global_allowlist: Allowlist, prefix: str
) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    strategy = st.from_regex(_generator_pattern(rule), fullmatch=True, alphabet=ASCII_PRINTABLE)

    @seed(SEED)
    @settings(
        max_examples=wanted * 12,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(sample: str) -> None:
        if len(found) < wanted and "\n" not in sample:
            sample = prefix + sample
            secret = rule.reports(sample, global_allowlist)
            if secret is not None and all(secret != known for _, known in found):
                found.append((sample, secret))

    collect()
    return found


# --- surroundings and survival -----------------------------------------------------------------


def _shell_double_quote(text: str) -> str:
    return re.sub(r'([\\"$`])', r"\\\1", text)


def _json_string(text: str) -> str:
    return json.dumps(text)[1:-1]


def _identity(text: str) -> str:
    return text


@dataclass(frozen=True)
class Surrounding:
    name: str
    template: str  # "{}" marks where the (escaped) sample goes
    escape: Callable[[str], str]

    def embed(self, sample: str) -> str:
        return self.template.replace("{}", self.escape(sample))


SURROUNDINGS = (
    Surrounding(
        "prose", "Heads up: I pasted {} into the team channel by mistake, please rotate it.", _identity
    ),
    Surrounding(
        "json",
        '{"role": "toolResult", "toolName": "read", "content": "loaded settings\\n{}\\n(2 more lines)"}',
        _json_string,
    ),
    Surrounding("dotenv", "# service settings\nLOG_LEVEL=debug\nAPP_VALUE={}\nPORT=8080\n", _identity),
    Surrounding("export", 'export APP_VALUE="{}"\n./run.sh --verbose', _shell_double_quote),
    Surrounding("log", "2024-05-01T12:00:00Z INFO worker[42] request failed: {} (retrying in 5s)", _identity),
)


def survives(secret: str, sample: str, surrounding: Surrounding, output: str) -> bool:
    escaped = surrounding.escape(secret)
    # Text that was there besides the secret (the surrounding, the rest of the sample, e.g. a
    # key name that happens to share characters with it) does not count as a leak.
    background = surrounding.embed(sample.replace(secret, "\0", 1))
    width = len(escaped) if len(escaped) < 8 else max(8, len(escaped) // 3)
    for start in range(len(escaped) - width + 1):
        window = escaped[start : start + width]
        if window in output and window not in background:
            return True
    return False


@dataclass
class RuleResult:
    rule_id: str
    samples: int = 0
    embeddings: int = 0
    survived: list[tuple[str, str, str]] = field(default_factory=list)  # surrounding, sample, output


def measure_recall(samples_per_rule: int) -> tuple[list[RuleResult], int, int]:
    rules, global_allowlist, without_regex = load_rules()
    results = []
    for rule in rules:
        result = RuleResult(rule.id)
        for sample, secret in generate_samples(rule, samples_per_rule, global_allowlist):
            result.samples += 1
            for surrounding in SURROUNDINGS:
                output = redact_text(surrounding.embed(sample)).text
                result.embeddings += 1
                if survives(secret, sample, surrounding, output):
                    result.survived.append((surrounding.name, sample, output))
        results.append(result)
    return results, len(rules) + without_regex, without_regex


# --- ordinary corpus -----------------------------------------------------------------------------

PROSE_EN = """\
The tokenizer splits text into tokens, and max_tokens caps how many the model may produce.
Reset your password from the account settings page; the link expires after one hour.
Our secretary filed the quarterly report and the author signed off on the key findings.
A bearer of good news is always welcome. Basic Usage: run the script with --help first.
The key insight is that the cache key must include the user id, not just the session.
Authentication failed because the token had expired; the client refreshed it and retried.
We rotated every credential after the incident and documented the process in the runbook.
Cookies are small pieces of data stored by the browser; the cookie banner asks for consent.
The API returns a JSON object with an access field and a list of permissions.
Keep secrets out of the repository: use environment variables or a secrets manager.
Password policy: at least 12 characters, one digit, one symbol. Token budget: 4096.
The private key never leaves the hardware module; only the public key is exported.
I fixed the flaky test by waiting for the server to bind before sending the first request.
"""

PROSE_ZH = """\
请不要把密码写进代码里，应该使用环境变量或者密钥管理服务。
令牌会在一小时后过期，客户端需要自动刷新。
这个接口的作用是根据用户的输入返回相关的记忆条目。
我们在周五的会议上讨论了缓存键的设计以及分词器的性能问题。
部署脚本会先检查配置文件，然后启动服务并输出日志。
密钥轮换完成后，请通知所有依赖该服务的团队。
"""

PYTHON_CODE = """\
import os
from typing import Optional

import requests
from pydantic import BaseModel, SecretStr


class Settings(BaseModel):
    api_key: SecretStr
    password: str | None = None
    token_limit: int = 4096
    max_tokens: int = 512


def login(username: str, password: str, token: Optional[str] = None) -> dict[str, str]:
    api_key = os.environ["OPENAI_API_KEY"]
    secret = os.getenv("APP_SECRET", "")
    headers = {"Authorization": f"Bearer {token}", "X-Api-Key": api_key}
    response = requests.post(URL, json={"username": username, "password": password}, headers=headers)
    response.raise_for_status()
    access_token = response.json()["access_token"]
    client = Client(api_key=api_key, timeout=30)
    auth = HTTPBasicAuth(username, password)
    self.token = token
    fields = ["username", "password", "password_confirmation", "email"]
    if not password:
        raise ValueError("password is required")
    password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
    return {"token": access_token, "client": client, "secret": secret}


def tokenize(text: str) -> list[str]:
    tokens = text.split()
    token_count = len(tokens)
    return tokens[:token_count]
"""

GO_CODE = """\
package auth

import (
\t"context"
\t"os"
)

type Config struct {
\tAPIKey   string `json:"api_key"`
\tPassword string `json:"password"`
\tTokenURL string `json:"token_url"`
}

func Load(ctx context.Context) (*Config, error) {
\tcfg := &Config{APIKey: os.Getenv("API_KEY"), Password: os.Getenv("DB_PASSWORD")}
\ttoken, err := fetchToken(ctx, cfg.TokenURL)
\tif err != nil {
\t\treturn nil, err
\t}
\treq.Header.Set("Authorization", "Bearer "+token)
\treturn cfg, nil
}
"""

TS_CODE = """\
export interface Credentials {
  apiKey: string;
  password?: string;
  token: string | null;
}

export async function call(creds: Credentials): Promise<Response> {
  const apiKey: string = process.env.API_KEY!;
  const headers = { Authorization: `Bearer ${creds.token}`, 'x-api-key': apiKey };
  const body = JSON.stringify({ password: creds.password, maxTokens: 256 });
  return fetch(`${BASE_URL}/v1/sessions?page=2&sort=desc`, { method: 'POST', headers, body });
}
"""

CONFIG_FILES = """\
# .env.example
LOG_LEVEL=info
PORT=8080
DATABASE_HOST=localhost
DATABASE_NAME=app
OPENAI_API_KEY=<your-key>
STRIPE_SECRET_KEY=${STRIPE_SECRET_KEY}
ANTHROPIC_API_KEY=
API_TOKEN=changeme
---
# values.yaml
replicaCount: 3
image:
  repository: ghcr.io/example/app
  tag: v1.24.3
secret_name: app-secrets
password_min_length: 12
auth_type: oauth2
token_ttl: 3600
max_tokens: 512
cookie_domain: .example.com
credentials_file: /etc/app/credentials.json
private_key_path: ~/.ssh/id_ed25519
---
[tool.poetry]
name = "example"
version = "0.3.1"
[tool.poetry.dependencies]
python = "^3.11"
requests = "2.32.3"
"""

DOCS = """\
## Configuration

Set the `OPENAI_API_KEY` environment variable to your key, e.g. `export OPENAI_API_KEY=sk-...`.
Pass `--token` on the command line or set `password: ********` in the config file.
The header must look like `Authorization: Bearer <token>`; see docs/auth.md for details.
GitHub tokens start with ghp_ and AWS access key ids with AKIA; never commit them.
Run `aws configure` and enter your access key when prompted.
"""

SHELL_AND_CI = """\
#!/usr/bin/env bash
set -euo pipefail
read -s -p "Password: " password
export PATH="$HOME/.local/bin:$PATH"
if [ -z "${API_KEY:-}" ]; then echo "API_KEY is not set" >&2; exit 1; fi
curl -fsSL https://example.com/install.sh | sh
git push -u origin main
docker run --rm -u 1000:1000 -e TOKEN="$TOKEN" -p 8080:8080 ghcr.io/example/app:1.4.2
ssh -i ~/.ssh/id_ed25519 deploy@10.0.3.17
kubectl create secret generic app --from-literal=password="$DB_PASSWORD"
gh auth login --with-token < token.txt
npm config set //registry.npmjs.org/:_authToken='${NPM_TOKEN}'
---
# .github/workflows/release.yml
permissions:
  contents: write
  id-token: write
jobs:
  publish:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with:
          node-version: 20
          registry-url: https://registry.npmjs.org
      - run: npm publish --provenance
        env:
          NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}
          GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}
---
FROM python:3.12-slim AS build
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
ARG VERSION=1.2.3
COPY --chown=app:app . /app
RUN --mount=type=secret,id=pip_token pip install -r requirements.txt
"""

SQL_AND_LOGS = """\
SELECT id, email, password_hash, token_expires_at FROM users WHERE token_expires_at < now();
CREATE TABLE api_keys (id uuid primary key, key_hash text not null, key_prefix text, created_at timestamptz);
UPDATE sessions SET revoked = true WHERE session_id = $1;
2024-05-01T12:00:01Z INFO  auth: token refreshed for user=42 expires_in=3600
2024-05-01T12:00:02Z WARN  ratelimit: remaining=0 reset=1714564800 limit=5000
2024-05-01T12:00:03Z DEBUG http: GET /api/v1/keys?page=2&per_page=50 200 12ms
2024-05-01T12:00:04Z ERROR db: password authentication failed for user "postgres"
2024-05-01T12:00:05Z INFO  cache: key=user:42:profile hit=true ttl=300
Traceback (most recent call last):
  File "/app/auth.py", line 42, in verify_token
    claims = jwt.decode(token, key=public_key, algorithms=["RS256"])
jwt.exceptions.ExpiredSignatureError: Signature has expired
"""

API_RESPONSES = """\
{"id": "chatcmpl-9PqLm2", "object": "chat.completion", "model": "gpt-4o-2024-05-13",
 "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42},
 "system_fingerprint": "fp_44709d6fcb", "choices": [{"finish_reason": "stop", "index": 0}]}
{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "stop_reason": "end_turn",
 "usage": {"input_tokens": 10, "output_tokens": 25, "cache_read_input_tokens": 0}}
{"role": "assistant", "content": [{"type": "text", "text": "I updated the token logic."}],
 "stopReason": "stop"}
{"name": "app", "scripts": {"build": "tsc -p .", "test": "vitest run"},
 "dependencies": {"jsonwebtoken": "^9.0.2", "passport": "^0.7.0", "passport-jwt": "^4.0.1",
                  "keytar": "7.9.0"}}
{"compilerOptions": {"strict": true, "noImplicitAny": true, "target": "ES2022", "paths": {"@/*": ["src/*"]}}}
{"token_type": "Bearer", "expires_in": 3600, "scope": "repo read:org", "refresh_token_expires_in": 15897600}
"""

MORE_CODE = """\
token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
secretKey := []byte(os.Getenv("JWT_SECRET"))
let api_key = std::env::var("API_KEY").expect("API_KEY must be set");
private static final String TOKEN_HEADER = "Authorization";
@Value("${app.jwt.secret}") private String jwtSecret;
var connectionString = Configuration.GetConnectionString("Default");
variable "db_password" {
  type      = string
  sensitive = true
}
resource "aws_db_instance" "main" {
  password = var.db_password
  username = "app"
}
<input type="password" name="password" autocomplete="current-password">
<label for="password">Password</label>
| api_key | string | Your API key, from the dashboard |
name,token_count,latency_ms
gpt-4o,1532,812
diff --git a/app/config.py b/app/config.py
-    api_key = None
+    api_key = settings.api_key
+    token = request.headers.get("X-Auth-Token")
def test_login_rejects_wrong_password(client, monkeypatch):
    monkeypatch.setenv("API_KEY", "test")
    resp = client.post("/login", json={"username": "alice", "password": ""})
    assert resp.json() == {"error": "invalid_token"}
"""

MORE_PROSE = """\
Note: the token expires after one hour, so the client refreshes it in the background.
Password: must be at least 12 characters long and include a digit.
API key: see the dashboard under Settings, then Developer.
We store only a hash of each API key and show its first four characters in the UI.
The server listens on 192.168.1.10:5432 and the admin contact is ops@example.com.
Version 2.4.0 fixed the cookie SameSite attribute; 2.4.1 fixed the session timeout.
The authorization flow follows OAuth 2.0 with PKCE; the code verifier is 64 characters.
我把 API 密钥放在环境变量里了，不会提交到仓库。
令牌：请在设置页面生成，不要发到群里。
密码长度至少 12 位，需要包含数字和符号。
会话在 30 分钟无操作后过期，刷新令牌有效期为 7 天。
"""


POD_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' pod-name alphabet


def _hex(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def _b64(rng: random.Random, length: int) -> str:
    return base64.b64encode(rng.randbytes(length)).decode()


def build_ordinary_corpus(rng: random.Random) -> list[tuple[str, str]]:
    shas = [_hex(rng, 40) for _ in range(30)]
    uuids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(30)]
    sha256s = [_hex(rng, 64) for _ in range(20)]
    git_log = "\n".join(
        f"commit {sha}\nAuthor: Dev Person <dev@example.com>\nDate:   Mon May 6 10:0{i % 10}:00 2024\n\n"
        f"    fix: handle empty token list in parser (#{100 + i})\n"
        for i, sha in enumerate(shas[:10])
    )
    github_json = json.dumps(
        [
            {
                "sha": sha,
                "node_id": "C_kwDOA" + _b64(rng, 18).rstrip("=").replace("+", "A").replace("/", "B"),
                "commit": {"tree": {"sha": shas[(i + 1) % 30]}, "message": "Update README.md"},
                "url": f"https://api.github.com/repos/example/app/commits/{sha}",
                "parents": [{"sha": shas[(i + 2) % 30]}],
            }
            for i, sha in enumerate(shas[10:20])
        ],
        indent=2,
    )
    uuid_lines = "\n".join(
        f'{{"id": "{u}", "request_id": "{uuids[(i + 1) % 30]}", '
        f'"trace_id": "{_hex(rng, 32)}", "status": 200}}'
        for i, u in enumerate(uuids)
    )
    hashes = (
        "\n".join(f"{h}  dist/app-{i}.tar.gz" for i, h in enumerate(sha256s[:10]))
        + "\n"
        + "\n".join(f"docker.io/library/python@sha256:{h}" for h in sha256s[10:])
    )
    integrity = "\n".join(
        f'"integrity": "sha512-{_b64(rng, 64)}",\n"resolved": "https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz"'
        for i in range(5)
    )
    pip_hashes = "\n".join(f"requests==2.32.{i} \\\n    --hash=sha256:{h}" for i, h in enumerate(sha256s[:5]))
    image = "data:image/png;base64," + _b64(rng, 6000)
    blob = "\n".join(_b64(rng, 57) for _ in range(40))
    certificate = (
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(_b64(rng, 48) for _ in range(12))
        + "\n-----END CERTIFICATE-----"
    )
    public_key = (
        "-----BEGIN PUBLIC KEY-----\n"
        + "\n".join(_b64(rng, 48) for _ in range(6))
        + "\n-----END PUBLIC KEY-----"
    )
    ssh_public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _b64(rng, 24).rstrip("=") + " dev@laptop"
    versions = "python 3.11.9, node v20.12.2, pydantic==2.7.1, go1.22.3 linux/amd64, 1.0.0-rc.1+build.5"
    paths = (
        "/home/dev/projects/app/src/main.py ~/.config/pi/settings.json "
        "C:\\Users\\dev\\AppData\\Local\\app.log ./node_modules/.bin/tsc"
    )
    urls = (
        "https://github.com/example/app/pull/123 "
        "https://docs.python.org/3/library/re.html?highlight=token#re.sub "
        "http://localhost:8080/api/v1/items?page=2&limit=50 git@github.com:example/app.git "
        "ssh://git@github.com/example/app.git https://medium.com/@author/post-abc123"
    )
    kubectl = "\n".join(
        f"api-deployment-{_hex(rng, 10)}-{''.join(rng.choice(POD_SUFFIX) for _ in range(5))}"
        f"   1/1   Running   0   {i}h"
        for i in range(8)
    )
    docker = "\n".join(
        f'{_hex(rng, 12)}   postgres:16-alpine   "docker-entrypoint.s…"   Up {i} hours' for i in range(5)
    )
    base64_json = json.dumps({"name": "logo.png", "content": _b64(rng, 3000), "encoding": "base64"})
    return [
        ("prose-en", PROSE_EN),
        ("prose-zh", PROSE_ZH),
        ("python", PYTHON_CODE),
        ("go", GO_CODE),
        ("typescript", TS_CODE),
        ("config", CONFIG_FILES),
        ("docs", DOCS),
        ("shell-and-ci", SHELL_AND_CI),
        ("sql-and-logs", SQL_AND_LOGS),
        ("api-responses", API_RESPONSES),
        ("more-code", MORE_CODE),
        ("more-prose", MORE_PROSE),
        ("git-log", git_log),
        ("github-json", github_json),
        ("uuids", uuid_lines),
        ("hashes", hashes),
        ("npm-integrity", integrity),
        ("pip-hashes", pip_hashes),
        ("image-data-uri", image),
        ("base64-blob", blob),
        ("certificate", certificate),
        ("public-key", public_key),
        ("ssh-public-key", ssh_public),
        ("versions", versions),
        ("paths", paths),
        ("urls", urls),
        ("kubectl", kubectl),
        ("docker-ps", docker),
        ("base64-json", base64_json),
    ]


def measure_false_positives(corpus: list[tuple[str, str]]) -> list[tuple[str, str]]:
    hits: list[tuple[str, str]] = []
    for name, text in corpus:
        output = redact_text(text).text
        for line_in, line_out in zip(text.splitlines(), output.splitlines(), strict=False):
            if line_in != line_out:
                hits.append((name, line_out[:200]))
        if "[REDACTED:" in output and not any(hit[0] == name for hit in hits):
            hits.append((name, "(placeholder on a changed line count)"))
    return hits


# --- real-world shapes -------------------------------------------------------------------------

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
HEX = "0123456789abcdef"


def _rand(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _vendor_tokens(rng: random.Random) -> list[str]:
    return [
        "AKIA" + _rand(rng, UPPER_DIGITS, 16),
        "ASIA" + _rand(rng, UPPER_DIGITS, 16),
        "ghp_" + _rand(rng, ALNUM, 36),
        "gho_" + _rand(rng, ALNUM, 36),
        "github_pat_" + _rand(rng, ALNUM, 22) + "_" + _rand(rng, ALNUM, 59),
        "hf_" + _rand(rng, ALNUM, 34),
        "npm_" + _rand(rng, ALNUM, 36),
        "AIza" + _rand(rng, ALNUM + "_-", 35),
        "gsk_" + _rand(rng, ALNUM, 52),
        "glpat-" + _rand(rng, ALNUM + "_-", 20),
        "sk-ant-api03-" + _rand(rng, ALNUM + "_-", 93) + "AA",
        "sk-proj-" + _rand(rng, ALNUM + "_-", 120),
        f"xoxb-{_rand(rng, '0123456789', 12)}-{_rand(rng, '0123456789', 12)}-{_rand(rng, ALNUM, 24)}",
        "sk_live_" + _rand(rng, ALNUM, 99),
    ]


def _split_samples(rng: random.Random) -> list[tuple[str, str]]:
    samples = []
    joints = ["\n", "\r\n", "\n    ", "\\n"]
    for _ in range(3):
        for token in _vendor_tokens(rng):
            joint = rng.choice(joints)
            if len(token) > 60:  # long tokens wrap over several lines, as an editor would
                width = rng.choice([40, 50])
                broken = joint.join(token[i : i + width] for i in range(0, len(token), width))
            else:
                cut = rng.randrange(5, len(token) - 3)
                broken = token[:cut] + joint + token[cut:]
            template = rng.choice(
                [
                    "here is the token: {} -- rotate it after the demo",
                    '{{"role": "user", "content": "use {} for the deploy"}}',
                    "> {}\n> (quoted from the chat)",
                ]
            )
            samples.append((template.format(broken), token))
    return samples


def _spaced_samples(rng: random.Random) -> list[tuple[str, str]]:
    samples = []
    for _ in range(10):
        token = rng.choice(["AKIA" + _rand(rng, UPPER_DIGITS, 16), "ghp_" + _rand(rng, ALNUM, 36)])
        size = rng.choice([4, 5]) if token.startswith("AKIA") else rng.choice([4, 8])
        grouped = " ".join(token[i : i + size] for i in range(0, len(token), size))
        samples.append((f"read it to me: {grouped} and then hang up", token))
    return samples


def _pem(rng: random.Random, label: str) -> str:
    body = "\n".join(_rand(rng, ALNUM + "+/", 64) for _ in range(rng.randint(4, 12)))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def _base64_pem_samples(rng: random.Random) -> list[tuple[str, str]]:
    samples = []
    labels = [
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ]
    for label in labels:
        for _ in range(4):
            encoded = base64.b64encode(_pem(rng, label).encode()).decode()
            wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
            for text in (
                f"apiVersion: v1\ndata:\n  tls.key: {encoded}\n",
                f"SIGNING_VALUE={encoded}",
                json.dumps({"value": encoded}),
                f"value:\n{wrapped}\nnext: 1",
            ):
                samples.append((text, encoded))
    return samples


def _hex_key_samples(rng: random.Random) -> list[tuple[str, str]]:
    samples = []
    names = ["private key", "secret key", "signing key", "AES-256 key", "hmac key", "encryption key", "私钥"]
    for name in names:
        for _ in range(3):
            key = _rand(rng, HEX, rng.choice([32, 64]))
            form = rng.choice(["plain", "0x", "spaced", "colon", "grouped"])
            shown = {
                "plain": key,
                "0x": "0x" + key,
                "spaced": " ".join(key[i : i + 2] for i in range(0, len(key), 2)),
                "colon": ":".join(key[i : i + 2] for i in range(0, len(key), 2)),
                "grouped": " ".join(key[i : i + 8] for i in range(0, len(key), 8)),
            }[form]
            template = rng.choice(["{}: {}", "the {} is {}", "{} (hex) = {}"])
            samples.append((template.format(name, shown), key))
    return samples


def _hex_encoded_samples(rng: random.Random) -> list[tuple[str, str]]:
    samples = []
    for _ in range(5):
        for token in _vendor_tokens(rng)[:6]:
            raw = token.encode()
            form = rng.choice(["hex", "spaced", "escaped"])
            shown = {
                "hex": raw.hex(),
                "spaced": " ".join(f"{b:02x}" for b in raw),
                "escaped": "".join(f"\\x{b:02x}" for b in raw),
            }[form]
            samples.append((f"payload: {shown}", raw.hex() if form == "hex" else shown))
    return samples


_EN_PASSWORD_FORMS = [
    "my password is {}",
    "My password is {} for the record",
    "the wifi password for the office is '{}'",
    'the db password is now "{}"',
    "password was {}.",
    "the root password is: {}",
    "the PIN code is {}",
    "the passphrase for the key is `{}`",
    "his password has been changed to {}",
    "pw: {}",
    "login pwd: {}",
]
_ZH_PASSWORD_FORMS = [
    "数据库密码是 {}",
    "我的密码是：{}",
    "密码为{}，别告诉别人",
    "管理员密码改成了 {}",
    "WiFi 密码是 “{}”",
    "开机密码设为 {}",
]


def _password(rng: random.Random) -> str:
    return rng.choice(
        [
            _rand(rng, "abcdefghijklmnopqrstuvwxyz", 6) + _rand(rng, "0123456789", 3),
            _rand(rng, ALNUM, 10),
            rng.choice(["Summer", "Winter", "Dragon", "Monkey"]) + _rand(rng, "0123456789", 4) + "!",
            _rand(rng, "0123456789", 6),
        ]
    )


def _prose_samples(rng: random.Random, forms: list[str]) -> list[tuple[str, str]]:
    samples = []
    for _ in range(3):
        for form in forms:
            secret = _password(rng)
            if form.startswith(("pw:", "login pwd:")) and secret.isdigit():
                secret += "a"  # a digits-only value after a short name is not shaped like a password
            samples.append((form.format(secret), secret))
    return samples


def _wrapped_samples(rng: random.Random) -> list[tuple[str, str]]:
    """Issue 26: every shape of `tests/wrapped_secrets.py`, over five seeds, one sample per secret."""
    seeds = [rng.randrange(1 << 30) for _ in range(5)]
    return [(case.text, secret) for seed in seeds for case in wrapped_cases(seed) for secret in case.secrets]


def shape_samples(rng: random.Random) -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        ("wrapped secret (issue 26)", _wrapped_samples(rng)),
        ("split-token (lines)", _split_samples(rng)),
        ("split-token (spaced groups)", _spaced_samples(rng)),
        ("base64-wrapped PEM key", _base64_pem_samples(rng)),
        ("hex key after a key name", _hex_key_samples(rng)),
        ("token written in hex", _hex_encoded_samples(rng)),
        ("password in prose (en)", _prose_samples(rng, _EN_PASSWORD_FORMS)),
        ("password in prose (zh)", _prose_samples(rng, _ZH_PASSWORD_FORMS)),
    ]


def shape_survives(secret: str, output: str) -> bool:
    compact = output.replace(" ", "").replace(":", "").replace("\\x", "")
    clean = secret.replace(" ", "").replace(":", "").replace("\\x", "")
    width = min(8, len(clean))
    return any(clean[i : i + width] in compact for i in range(len(clean) - width + 1))


def measure_shapes(redact: Callable[[str], str], rng: random.Random) -> list[tuple[str, int, int, list[str]]]:
    results = []
    for kind, samples in shape_samples(rng):
        missed = [text for text, secret in samples if shape_survives(secret, redact(text))]
        results.append((kind, len(samples), len(samples) - len(missed), missed))
    return results


def _kept_samples() -> list[tuple[str, str]]:
    """Issue 26: ordinary multi-line text (wrapped_secrets.kept_cases) that must not change."""
    return [
        ("multi-line", case.text)
        for seed in range(5)
        for case in kept_cases(seed)
        if case.name.startswith("ordinary")
    ]


def measure_corpus_rate(redact: Callable[[str], str]) -> list[tuple[str, int, list[str]]]:
    by_group: dict[str, tuple[int, list[str]]] = {}
    for group, text in [*ordinary_samples(), *_kept_samples()]:
        total, changed = by_group.get(group, (0, []))
        if redact(text) != text:
            changed = [*changed, text]
        by_group[group] = (total + 1, changed)
    return [(group, total, changed) for group, (total, changed) in by_group.items()]


# The rules as they were before the issue-13 kinds: the baseline of the side-by-side timing.
_NEW_RULE_NAMES = frozenset({"base64-pem", "split-token", "hex-encoded", "hex-key", "prose-password"})
# The rules before the issue-26 kinds (values wrapped onto the next lines); the private-key block
# rule's and the URL rule's own changes (a wrapped header, a body without its header, a wrapped
# URL password) are in both.
_WRAPPED_RULE_NAMES = frozenset({"continued-value", "name-then-block", "split-jwt"})
_BASELINE_RULES = tuple(
    rule
    for rule in redact_module._RULES
    if getattr(rule, "name", "") not in _NEW_RULE_NAMES | _WRAPPED_RULE_NAMES
)


_BEFORE_WRAPPED_RULES = tuple(
    rule for rule in redact_module._RULES if getattr(rule, "name", "") not in _WRAPPED_RULE_NAMES
)


def _run_rules(rules: tuple[Any, ...], text: str) -> str:
    tally = Tally()
    data = encode_text(text)
    for _ in range(3):
        before = tally.count
        for rule in rules:
            data = rule(data, tally)
        if tally.count == before:
            break
    return decode_text(data)


def redact_baseline(text: str) -> str:
    return _run_rules(_BASELINE_RULES, text)


def redact_before_wrapped(text: str) -> str:
    return _run_rules(_BEFORE_WRAPPED_RULES, text)


def _redact(text: str) -> str:
    return redact_text(text).text


# --- timing ----------------------------------------------------------------------------------

MEGABYTE = 1_000_000


def adversarial_inputs(rng: random.Random) -> list[tuple[str, str]]:
    def fill(unit: str) -> str:
        return (unit * (MEGABYTE // len(unit) + 1))[:MEGABYTE]

    return [
        ("a*1e6", "a" * MEGABYTE),
        ("sk-*333k", fill("sk-")),
        ("=*1e6", "=" * MEGABYTE),
        ("base64 no boundaries", base64.b64encode(rng.randbytes(MEGABYTE * 3 // 4)).decode()[:MEGABYTE]),
        ("BEGIN without END", fill("-----BEGIN RSA PRIVATE KEY-----\n")),
        ("-----BEGIN*", fill("-----BEGIN")),
        ("password=*", fill("password=")),
        ("'password: '*", fill("password: ")),
        ('"key":"*', fill('"api_key":"')),
        ("Bearer *", fill("Bearer ")),
        ("curl -u *", fill("curl -u ")),
        ("https://a:*", fill("https://a:")),
        ("@*1e6", "@" * MEGABYTE),
        ("digits", "1" * MEGABYTE),
        ("digits:A", fill("123456789:A")),
        ("ey.ey.", fill("eyAAAAAAAAAAAA.")),
        ("xoxb-*", fill("xoxb-")),
        ("AKIA*", fill("AKIA")),
        ("backslash", "\\" * MEGABYTE),
        ('quote"', '"' * MEGABYTE),
        ("token =*", fill("token = ")),
        ("kind: Secret data:", fill("kind: Secret\ndata:\n  a: ")),
        ("-H '", fill("-H 'X-Key: ")),
        ("<password>", fill("<password>")),
        ('key="', fill('key="')),
        ("password=1.1.1...", "password=" + fill("1.")),
        ("密码：a1 (non-ASCII)", fill("密码：a1 ")),
        ("random printable", "".join(rng.choice([chr(c) for c in range(32, 127)]) for _ in range(MEGABYTE))),
        # the new rules' prefixes and shapes
        ("AKIA\\n*", fill("AKIA\n")),
        ("ghp_ *", fill("ghp_ ")),
        ("ghp_x\\nx*", fill("ghp_Ab1\nCd2")),
        ("github_pat_ words", fill("github_pat_ab cd ")),
        ("LS0tLS1CRUdJTi\\n*", fill("LS0tLS1CRUdJTiBQUklWQVRF\n")),
        ("text-hex 41*", "41" * (MEGABYTE // 2)),
        ("hex bytes '41 '*", fill("41 ")),
        ("\\x41*", fill("\\x41")),
        ("private key: hex*", fill("private key: 0123456789abcdef ")),
        ("password is *", fill("password is ")),
        ("password for x is *", fill("password for the x is ")),
        ("密码是 *", fill("密码是 ")),
        ("pw: *", fill("pw: ")),
        # issue 26: values wrapped onto the next lines
        ("password=x\\nAb1\\n*", "password=Zq9xK2mL7pWq\n" + fill("Ab1Cd2Ef3Gh4\n")),
        ("[REDACTED:x]\\nA1*", fill("[REDACTED:password]\nA1b2\n")),
        ("secret: |\\n*", fill("client_secret: |\n  ")),
        ("secret:\\nkey: *", fill("client_secret:\nkey: ")),
        ("eyJ\\n*", fill("eyJ\n")),
        ("eyJx.\\n*", fill("eyJhbGciOiJIUzI1NiJ9.\n")),
        ("https://a:b\\n*", fill("https://a:b\n")),
        ("Ab1=\\n*END", fill("QUJDREVGR0hJSktMTU5PUFFS\n")[: MEGABYTE - 30] + "-----END PRIVATE KEY-----"),
        ("BEGIN PRIVATE\\n*", fill("-----BEGIN PRIVATE\n")),
    ]


def time_call(text: str) -> float:
    started = time.perf_counter()
    redact_text(text)
    return time.perf_counter() - started


# --- report ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=5, help="samples per gitleaks rule (default 5)")
    parser.add_argument("--verbose", action="store_true", help="show every surviving secret")
    args = parser.parse_args()
    rng = random.Random(SEED)

    started = time.perf_counter()
    results, total_rules, without_regex = measure_recall(args.samples)
    generated = [result for result in results if result.samples]
    full = [result for result in generated if not result.survived]
    embeddings = sum(result.embeddings for result in generated)
    survived = sum(len(result.survived) for result in generated)
    recall_seconds = time.perf_counter() - started

    print("== recall against gitleaks rules ==")
    print(f"rules total:                 {total_rules}")
    print(f"rules without a regex:       {without_regex} (path-only; skipped)")
    skipped = [result.rule_id for result in results if not result.samples]
    print(f"rules with no valid sample:  {len(skipped)} (skipped: {', '.join(skipped)})")
    print(f"rules generated:             {len(generated)}")
    print(
        f"samples x surroundings:      {embeddings} "
        f"({args.samples} samples/rule, {len(SURROUNDINGS)} surroundings)"
    )
    print(
        f"rules fully redacted:        {len(full)}/{len(generated)} = {100 * len(full) / len(generated):.1f}%"
    )
    print(f"embeddings with a survivor:  {survived}/{embeddings} = {100 * survived / embeddings:.2f}%")
    missed = [result for result in generated if result.survived]
    for result in missed:
        places = Counter(name for name, _, _ in result.survived)
        print(
            f"  not fully redacted: {result.rule_id} "
            f"({len(result.survived)} of {result.embeddings}: {dict(places)})"
        )
        shown = result.survived if args.verbose else result.survived[:1]
        for name, sample, output in shown:
            print(f"    [{name}] sample={sample!r}\n      output={output!r}")
    print(f"(recall measured in {recall_seconds:.1f} s)")

    print("\n== false positives on the ordinary corpus ==")
    corpus = build_ordinary_corpus(rng)
    corpus_chars = sum(len(text) for _, text in corpus)
    hits = measure_false_positives(corpus)
    print(f"documents: {len(corpus)}, characters: {corpus_chars}")
    print(f"false positives: {len(hits)}")
    for name, line in hits:
        print(f"  [{name}] {line!r}")

    print("\n== real-world shapes (issue 13): detection per kind ==")
    print(f"{'kind':<30} {'samples':>7} {'detected':>8} {'rate':>7}   issue-13 baseline   before issue 26")
    current = measure_shapes(_redact, random.Random(SEED + 13))
    before = measure_shapes(redact_baseline, random.Random(SEED + 13))
    before_wrapped = measure_shapes(redact_before_wrapped, random.Random(SEED + 13))
    for (kind, total, found, missed), (_, _, found_before, _), (_, _, found_unwrapped, _) in zip(
        current, before, before_wrapped, strict=True
    ):
        print(
            f"{kind:<30} {total:>7} {found:>8} {100 * found / total:>6.1f}%   "
            f"{100 * found_before / total:16.1f}%   {100 * found_unwrapped / total:14.1f}%"
        )
        for text in missed[: 3 if args.verbose else 1]:
            print(f"    missed: {text[:160]!r}")
    all_total = sum(total for _, total, _, _ in current)
    all_found = sum(found for _, _, found, _ in current)
    print(f"{'all new kinds':<30} {all_total:>7} {all_found:>8} {100 * all_found / all_total:>6.1f}%")

    print("\n== false positives on the larger ordinary corpus (ordinary_corpus.py) ==")
    rates = measure_corpus_rate(_redact)
    baseline_rates = dict((group, len(changed)) for group, _, changed in measure_corpus_rate(redact_baseline))
    unwrapped_rates = dict(
        (group, len(changed)) for group, _, changed in measure_corpus_rate(redact_before_wrapped)
    )
    for group, total, changed in rates:
        print(
            f"  {group:<12} {total:>4} samples, {len(changed):>3} changed ({100 * len(changed) / total:.1f}%)"
            f"; issue-13 baseline: {baseline_rates[group]}; before issue 26: {unwrapped_rates[group]}"
        )
        for text in changed[:3]:
            print(f"    changed: {text[:120]!r}")
    samples_total = sum(total for _, total, _ in rates)
    changed_total = sum(len(changed) for _, _, changed in rates)
    print(
        f"false-positive rate: {changed_total}/{samples_total} = {100 * changed_total / samples_total:.2f}% "
        f"(baseline rules: {sum(baseline_rates.values())}/{samples_total})"
    )

    print("\n== timing ==")
    worst, worst_name = 0.0, ""
    for name, text in adversarial_inputs(rng):
        seconds = time_call(text)
        if seconds > worst:
            worst, worst_name = seconds, name
        print(f"  1 MB adversarial {name:<22} {seconds * 1000:8.1f} ms")
    print(f"worst 1 MB adversarial input: {worst * 1000:.1f} ms ({worst_name})")
    texts = {
        "ordinary corpus": "\n".join(text for _, text in corpus),
        "+ password-heavy corpus": "\n".join([*(t for _, t in corpus), *(t for _, t in ordinary_samples())]),
    }
    for text_label, ordinary in texts.items():
        repeated = ordinary * max(1, 4 * MEGABYTE // len(ordinary))
        # interleaved, best of three: a shared machine's load comes and goes between runs
        runs = (
            ("issue-13 baseline", redact_baseline),
            ("before issue 26", redact_before_wrapped),
            ("all rules", _redact),
        )
        best = {label: math.inf for label, _ in runs}
        for _ in range(3):
            for label, redact in runs:
                started = time.perf_counter()
                redact(repeated)
                best[label] = min(best[label], time.perf_counter() - started)
        megabytes = len(repeated) / MEGABYTE
        for label, seconds in best.items():
            print(
                f"throughput, {text_label:<23} {label:<17}: {megabytes / seconds:.1f} MB/s "
                f"({megabytes:.1f} MB in {seconds:.2f} s, best of 3)"
            )
    small = [text for _, text in corpus]
    started = time.perf_counter()
    for _ in range(20):
        for text in small:
            redact_text(text)
    per_doc = (time.perf_counter() - started) / (20 * len(small))
    print(f"mean time per ordinary document: {per_doc * 1e6:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
