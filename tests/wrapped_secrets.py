"""Secrets wrapped onto the next lines (issue 26), and ordinary multi-line text that must stay.

Shared by the unit tests, the real-Pi E2E and bench/bench_redaction.py. Every credential is made
at run time from a seeded RNG, so the repository holds none.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class WrappedCase:
    name: str
    text: str
    secrets: tuple[str, ...]  # each credential whole, as it was before the wrap


@dataclass(frozen=True)
class KeptCase:
    name: str
    text: str
    kept: tuple[str, ...]  # lines that are no secret and must come out as they went in


def survivors(case: WrappedCase, output: str, width: int = 8) -> list[str]:
    """The `width`-character windows of the case's secrets still in `output`."""
    found = []
    for secret in case.secrets:
        for index in range(len(secret) - width + 1):
            window = secret[index : index + width]
            if window in output and window not in _surroundings(case):
                found.append(window)
    return found


def _surroundings(case: WrappedCase) -> str:
    # a window that also occurs in the text around the secret proves nothing
    rest = case.text
    for secret in case.secrets:
        rest = rest.replace(secret, " ")
    return rest


def _cut(value: str, *widths: int) -> list[str]:
    parts, start = [], 0
    for width in widths:
        parts.append(value[start : start + width])
        start += width
    parts.append(value[start:])
    return [part for part in parts if part]


def _lines(value: str, width: int) -> list[str]:
    return [value[i : i + width] for i in range(0, len(value), width)]


def wrapped_cases(seed: int = 2026) -> list[WrappedCase]:
    rng = random.Random(seed)

    def rand(length: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(length))

    key_id = "AKIA" + rand(16, UPPER_DIGITS)
    secret_key = rand(40, ALNUM + "/+")
    generic = rand(32)
    password = rand(22)
    b64_64 = base64.b64encode(rng.randbytes(64)).decode()
    key_body = _lines(base64.b64encode(rng.randbytes(600)).decode(), 64)
    payload = json.dumps({"sub": rand(10, string.digits), "name": "Ann", "iat": 1716239022})
    jwt = ".".join(
        [
            base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("="),
            base64.urlsafe_b64encode(payload.encode()).decode().rstrip("="),
            rand(43, ALNUM + "-_"),
        ]
    )
    basic = base64.b64encode(f"deploy:{password}".encode()).decode()
    k1, k2 = _cut(key_id, 10)
    s1, s2 = _cut(secret_key, 20)
    g = _cut(generic, 16)
    p = _cut(password, 11)
    pem_key = "\n".join(key_body)
    cases = [
        WrappedCase(
            "aws credentials file, both values wrapped",
            f"[default]\naws_access_key_id = {k1}\n{k2}\naws_secret_access_key = {s1}\n{s2}\n"
            "region = us-east-1\n",
            (key_id, secret_key),
        ),
        WrappedCase(
            "aws secret in a shell export",
            f"export AWS_SECRET_ACCESS_KEY={secret_key[:25]}\n{secret_key[25:]}\nexport AWS_REGION=eu-west-1",
            (secret_key,),
        ),
        WrappedCase(
            "aws secret over three lines",
            "aws_secret_access_key=" + "\n".join(_cut(secret_key, 14, 14)) + "\n",
            (secret_key,),
        ),
        WrappedCase(
            "aws secret, indented continuation",
            f"    aws_secret_access_key = {s1}\n    {s2}\n",
            (secret_key,),
        ),
        WrappedCase("aws secret, CRLF", f"aws_secret_access_key = {s1}\r\n{s2}\r\n", (secret_key,)),
        WrappedCase(
            "aws secret inside a JSON string",
            json.dumps({"text": f"aws_secret_access_key = {s1}\n{s2}"}),
            (secret_key,),
        ),
        WrappedCase("api_key = value", f"api_key = {g[0]}\n{g[1]}\n", (generic,)),
        WrappedCase("env token", f"SERVICE_TOKEN={generic[:20]}\n{generic[20:]}\nDEBUG=1", (generic,)),
        WrappedCase("yaml folded", f"db:\n  password: {p[0]}\n    {p[1]}\n  host: x", (password,)),
        WrappedCase("yaml block scalar", f"auth:\n  client_secret: |\n    {g[0]}\n    {g[1]}\n", (generic,)),
        WrappedCase(
            "base64 block under a name",
            "client_secret:\n" + "\n".join(_lines(b64_64, 40)) + "\n",
            (b64_64,),
        ),
        WrappedCase(
            "JSON value wrapped by a terminal",
            f'{{"client_secret": "{generic[:18]}\n{generic[18:]}", "id": 3}}',
            (generic,),
        ),
        WrappedCase(
            "header in a shell continuation",
            f"curl -H 'X-Api-Key: {g[0]}\\\n{g[1]}' https://api.example.com",
            (generic,),
        ),
        WrappedCase("bearer token", f"Authorization: Bearer {g[0]}\n{g[1]}\nAccept: */*", (generic,)),
        WrappedCase(
            "basic auth",
            f"Authorization: Basic {basic[:20]}\n{basic[20:]}\n",
            (basic,),
        ),
        WrappedCase("JWT broken at its dots", "token: " + jwt.replace(".", ".\n"), tuple(jwt.split("."))),
        WrappedCase(
            "JWT wrapped at 30 columns",
            "here: " + "\n".join(_lines(jwt, 30)),
            (jwt,),
        ),
        WrappedCase("bare JWT wrapped once", f"{jwt[:50]}\n{jwt[50:]}\n", (jwt,)),
        WrappedCase(
            "postgres URL, password wrapped",
            f"DATABASE_URL=postgres://app:{p[0]}\n{p[1]}@db.example.com:5432/app",
            (password,),
        ),
        WrappedCase(
            "mongodb+srv URL, password wrapped",
            f"mongodb+srv://admin:{p[0]}\n{p[1]}@cluster0.mongodb.net/test",
            (password,),
        ),
        WrappedCase(
            "ADO.NET connection string",
            f"Server=tcp:x.database.windows.net;User ID=sa;Password={p[0]}\n{p[1]};Encrypt=true",
            (password,),
        ),
        WrappedCase(
            "Azure storage connection string",
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={b64_64[:40]}\n{b64_64[40:]}"
            ";EndpointSuffix=core.windows.net",
            (b64_64,),
        ),
        WrappedCase(
            "PEM key with CRLF",
            "-----BEGIN RSA PRIVATE KEY-----\r\n"
            + "\r\n".join(key_body)
            + "\r\n-----END RSA PRIVATE KEY-----",
            tuple(key_body),
        ),
        WrappedCase(
            "PEM key quoted in a mail",
            "> -----BEGIN OPENSSH PRIVATE KEY-----\n> "
            + "\n> ".join(key_body)
            + "\n> -----END OPENSSH PRIVATE KEY-----",
            tuple(key_body),
        ),
        WrappedCase(
            "PEM header wrapped",
            f"-----BEGIN RSA PRIVATE\nKEY-----\n{pem_key}\n-----END RSA PRIVATE KEY-----",
            tuple(key_body),
        ),
        WrappedCase(
            "PEM body without its header",
            f"the rest of it:\n{pem_key}\n-----END PRIVATE KEY-----",
            tuple(key_body),
        ),
        WrappedCase(
            "Kubernetes Secret value wrapped",
            f"apiVersion: v1\nkind: Secret\ndata:\n  password: {b64_64[:40]}\n    {b64_64[40:]}",
            (b64_64,),
        ),
        WrappedCase("password in prose", f"the password is {p[0]}\n{p[1]}", (password,)),
        WrappedCase("password as a CLI flag", f"mysql -u root --password={p[0]}\n{p[1]} -h db", (password,)),
        WrappedCase("password in Chinese", f"密码：{p[0]}\n{p[1]}", (password,)),
        WrappedCase(
            "GitHub token wrapped",
            f"token {(gh := 'ghp_' + rand(36))[:20]}\n{gh[20:]}",
            (gh,),
        ),
    ]
    return cases


def kept_cases(seed: int = 2026) -> list[KeptCase]:
    """Ordinary multi-line text, alone or after a secret: none of it may change."""
    rng = random.Random(seed + 1)
    secret = "".join(rng.choice(ALNUM) for _ in range(32))
    aws = "".join(rng.choice(ALNUM + "/+") for _ in range(40))
    token = "ghp_" + "".join(rng.choice(ALNUM) for _ in range(36))
    ordinary = [
        "password:\n  minLength: 12\n  requireDigits: true",
        'api_key = os.environ["API_KEY"]\nclient = Client(api_key)\nclient.ping()',
        "Set the token in your\nenvironment before running\nthe tests, then rotate it.",
        "steps:\n  - run: deploy\n    env:\n      TOKEN:\n        ${{ secrets.DEPLOY_TOKEN }}",
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: Ann <ann@example.com>\n\n"
        "    Fix the token refresh",
        "secret_name: db-creds\nregion: us-east-1\nrotation_days: 30",
        "password = getpass.getpass()\nif not password:\n    raise SystemExit(1)",
        "密码\n请在设置页面修改，不要发到群里。",
        "eyJ is how base64 of a JSON object starts\nnice trick for spotting JWTs",
        "see https://example.com/docs/very/long/\npath/to/the/page?tab=2",
        "Steps:\n- rotate the key\n- update the secret in the vault\n- redeploy",
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(_lines(base64.b64encode(rng.randbytes(300)).decode(), 64))
        + "\n-----END CERTIFICATE-----",
        "private:\n  key: value\npublic: true",
        "The API key\nAbcDef rotation happens weekly.",
    ]
    cases = [KeptCase(f"ordinary {index}", text, (text,)) for index, text in enumerate(ordinary)]
    after = [
        (f"password = {secret}\nThen restart the service.", "Then restart the service."),
        (f"API_KEY={secret}\nDEBUG=1\nPORT=8080", "DEBUG=1\nPORT=8080"),
        (f"aws_secret_access_key = {aws}\nregion = us-east-1", "region = us-east-1"),
        (f"token: {secret}\nhost: db.local", "host: db.local"),
        (f"{token}\nREADME updated", "README updated"),
        (f"password = {secret}\nrun_tests", "run_tests"),
        (f"Authorization: Bearer {secret}\nContent-Type: application/json", "Content-Type: application/json"),
        (f"password: {secret}\n  Key2: value", "Key2: value"),
        (f"the password is {secret}\nMyClass handles the rest", "MyClass handles the rest"),
        (f"secret = {secret}\nv1.2.3 released 2026-01-02", "v1.2.3 released 2026-01-02"),
    ]
    cases += [KeptCase(f"after a secret {index}", text, (kept,)) for index, (text, kept) in enumerate(after)]
    return cases
