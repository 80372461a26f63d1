"""Classify key names (JSON keys, env var names, header names) by how likely they hold a secret.

Names are judged by their *words*, not by substrings: ``client_secret`` and ``apiKey`` are
sensitive, ``secretary``, ``tokenizer`` and ``max_tokens`` are not. Text redaction also needs two
weaker tiers for ``name = value`` pairs whose value looks like a credential: names that merely
contain a credential-ish fragment (``xkeyy``) and names that mention a service issuing API
credentials (``HEROKU``); see :func:`key_context`.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import Final

# Splits "XApiKey", "client_secret", "x-api-key", "db.password2" into lowercase words. Runs on
# short names only (callers cap the length), and has no nested quantifier, so it stays linear.
_WORD_RE: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

MAX_KEY_CHARS: Final = 256

# Words that, placed after a credential word, say the value describes the credential rather than
# holding it: ``password_policy``, ``token_count``, ``secret_name``, ``api_key_header``.
_METADATA_WORDS: Final = frozenset(
    """
    name names type types kind id ids length len size count counts limit limits min max budget
    path paths file files filename dir directory folder url urls uri uris endpoint endpoints
    host ref refs arn version versions policy policies expiry expires expiration expired exp ttl
    lifetime timeout hint format fmt algorithm algo alg enabled disabled enable disable required
    optional field fields label env var vars variable param params parameter parameters attr
    attribute header headers prefix suffix provider providers method methods mode scheme
    strategy source sources store location rotation rotated last4 mask masked placeholder usage
    used created updated date time timestamp domain secure samesite httponly manager backend
    handler helper description desc help title pattern regex validation validator rules strength
    complexity reset changed visible visibility show shown input stdin index idx hash hashed sha
    sha1 sha256 sha512 md5 digest checksum etag integrity commit rev revision window estimate
    estimated stats metrics consent banner cache fingerprint fingerprints thumbprint
    """.split()
)

# First words that turn the name into a flag or a question about the credential.
_FLAG_PREFIXES: Final = frozenset(
    """
    is has use uses using enable enabled disable require requires allow show hide should can
    needs need with without no skip
    """.split()
)

# Words that make any credential-looking name public: ``public_key``, ``publishable_key``.
_PUBLIC_WORDS: Final = frozenset({"public", "pub", "publishable"})

# Words naming what a ``*_key`` or ``*_keys`` holds when it is a credential.
_KEY_QUALIFIERS: Final = frozenset(
    """
    api private priv secret access signing sign encryption encrypt decryption crypt crypto
    cipher aes master license licence client service account app application auth session
    webhook deploy admin root ssh gpg pgp hmac jwt shared consumer subscription sas rsa dsa
    ecdsa ed25519 x openai anthropic stripe sendgrid mailgun google gemini groq mistral cohere
    twilio algolia
    """.split()
)

# Words before ``token`` that make it a count or a vocabulary entry, not a credential.
_NON_CREDENTIAL_TOKEN_QUALIFIERS: Final = frozenset(
    """
    max min num number input output total prompt completion cached reasoning eos bos pad unk sep
    cls mask special start end stop next prev previous page continuation cursor pagination sync
    new first last per count
    """.split()
)

# Words before ``tokens``/``keys`` (plural) that keep them credentials: ``auth_tokens``.
_CREDENTIAL_QUALIFIERS: Final = frozenset(
    """
    api auth access refresh bearer session id oauth personal secret private github gitlab npm
    pypi slack
    """.split()
)

# Single words that are credential names on their own (concatenations included).
_FUSED_KINDS: Final[dict[str, str]] = {
    "password": "password",
    "passwords": "password",
    "passwd": "password",
    "passwort": "password",
    "kennwort": "password",
    "passphrase": "password",
    "passcode": "password",
    "pswd": "password",
    "secret": "secret",
    "secrets": "secret",
    "clientsecret": "secret",
    "secretkey": "secret-key",
    "accesskey": "secret-key",
    "signingkey": "secret-key",
    "masterkey": "secret-key",
    "encryptionkey": "secret-key",
    "licensekey": "secret-key",
    "apikey": "api-key",
    "apikeys": "api-key",
    "xapikey": "api-key",
    "privatekey": "private-key",
    "privkey": "private-key",
    "accesstoken": "token",
    "refreshtoken": "token",
    "authtoken": "token",
    "idtoken": "token",
    "apitoken": "token",
    "bearertoken": "token",
    "sessiontoken": "token",
    "credential": "credential",
    "credentials": "credential",
    "creds": "credential",
    "cookie": "cookie",
    "cookies": "cookie",
    "setcookie": "cookie",
    "authorization": "authorization",
    "auth": "authorization",
}

# Non-Latin and non-English credential words, matched as substrings of the raw name.
_FOREIGN_WORDS: Final[dict[str, str]] = {
    "密码": "password",
    "口令": "password",
    "密钥": "secret-key",
    "秘钥": "secret-key",
    "令牌": "token",
    "凭证": "credential",
    "凭据": "credential",
    "contraseña": "password",
    "contrasena": "password",
    "mot_de_passe": "password",
    "motdepasse": "password",
}

# Fragments that make a name *possibly* about a credential (weak tier; the value must then look
# random). Lowercase, matched as substrings.
WEAK_FRAGMENTS: Final = ("key", "token", "secret", "passw", "pwd", "auth", "cred", "api", "access", "private")

# Services that issue API credentials whose format cannot be told apart from ordinary ids (hex,
# UUIDs, plain alphanumerics), so the name of the service next to the value is the only clue.
# Written with "_" where a name may be split ("NEW_RELIC", "newrelic", "new-relic").
SERVICE_WORDS: Final = tuple(
    """
    adafruit adobe airtable algolia alibaba aliyun amplitude asana atlassian confluence jira
    beamer bitbucket bittrex binance braintree buildkite circleci cloudflare codecov cohere
    coinbase confluent contentful contribsys databricks datadog deepseek digital_ocean discord
    doppler dropbox droneci duffel dynatrace etsy facebook fastly finicity finnhub firebase
    flickr freshbooks gitter gocardless grafana heroku hubspot hugging_face intercom jfrog
    artifactory bintray xray kraken kucoin launch_darkly linear linked_in looker mailchimp
    mailgun mapbox mattermost meraki message_bird mistral netlify new_relic nytimes
    new_york_times okta pagerduty paypal plaid postman private_ai pusher rapidapi replicate
    sendbird sendgrid sentry shopify slack snyk sonar squarespace sumo telegram travis trello
    twilio twitch twitter typeform vercel yandex zendesk
    """.split()
)
SERVICE_NAMES: Final = tuple(word.replace("_", "") for word in SERVICE_WORDS)

# Abbreviations that name a password only as the last word of a name.
_SHORT_PASSWORD_NAMES: Final = frozenset({"pw", "pwd"})

# Credential words distinctive enough to count even glued inside another word.
_EMBEDDED_WORDS: Final = ("password", "passwd", "secret")

_SEPARATORS_RE: Final = re.compile(r"[\s_.\-]+")
_SEGMENT_RE: Final = re.compile(r"[A-Za-z0-9]+")


class KeyTier(enum.Enum):
    """How strongly a name suggests that its value is a secret."""

    NONE = 0
    WEAK = 1  # contains a credential-ish fragment ("xkeyy"); value must look random
    EMBEDDED = 2  # "password"/"secret" glued inside a word; value must look like a password
    SERVICE = 3  # names a credential-issuing service; value must look like a credential
    STRONG = 4  # a credential name; any literal value is a secret


@dataclass(frozen=True, slots=True)
class KeyContext:
    tier: KeyTier
    kind: str  # placeholder kind for the value


_NO_CONTEXT: Final = KeyContext(KeyTier.NONE, "secret")


def key_words(name: str) -> list[str]:
    """Lowercase words of a name: ``XApiKey`` → ``["x", "api", "key"]``."""
    return [word.lower() for word in _WORD_RE.findall(name[-MAX_KEY_CHARS:])]


def _segment_words(name: str) -> list[str]:
    """Words split on separators only: ``SEcReT_Key`` → ``["secret", "key"]`` (odd casing)."""
    return [segment.lower() for segment in _SEGMENT_RE.findall(name[-MAX_KEY_CHARS:])]


def _password_like(word: str, words: list[str], index: int) -> bool:
    # "pwd" alone is the working directory and "pass" alone a test verdict; "db_pass" is not.
    if word in ("pwd", "pass"):
        return len(words) > 1 and index == len(words) - 1 and words[0] not in ("old", "cur", "current")
    return False


def _concept_at(words: list[str], index: int) -> str | None:
    """The credential kind named by ``words[index]`` (with its neighbours), or None."""
    word = words[index]
    previous = words[index - 1] if index > 0 else ""
    if word in _FUSED_KINDS:
        return _FUSED_KINDS[word]
    if _password_like(word, words, index):
        return "password"
    if word == "token":
        return None if previous in _NON_CREDENTIAL_TOKEN_QUALIFIERS else "token"
    if word == "tokens":
        return "token" if previous in _CREDENTIAL_QUALIFIERS else None
    if word in ("key", "keys"):
        if previous == "api":
            return "api-key"
        if previous in ("private", "priv", "ssh", "gpg", "pgp", "rsa", "dsa", "ecdsa", "ed25519"):
            return "private-key"
        if previous in _KEY_QUALIFIERS or (word == "keys" and previous in _CREDENTIAL_QUALIFIERS):
            return "secret-key"
        return None
    return None


def _aws_secret(words: list[str], kind: str) -> str:
    if kind in ("secret", "secret-key") and ("aws" in words or {"secret", "access", "key"} <= set(words)):
        return "aws-secret"
    return kind


def _bundler_credential(words: list[str]) -> bool:
    # Bundler reads gem-server credentials ("user:password") from BUNDLE_<HOST>, e.g.
    # BUNDLE_GEMS__EXAMPLE__COM.
    return len(words) >= 3 and words[0] == "bundle" and words[-1] in ("com", "io", "org", "net", "dev")


@functools.lru_cache(maxsize=4096)
def classify_key(name: str) -> str | None:
    """The placeholder kind if ``name`` is a credential name, else None."""
    lowered = name.lower()
    for foreign, foreign_kind in _FOREIGN_WORDS.items():
        if foreign in lowered:
            return foreign_kind
    camel = key_words(name)
    segments = _segment_words(name)
    kind = _classify_words(camel) or (None if segments == camel else _classify_words(segments))
    if (
        kind is None
        and segments
        and segments[-1] not in _METADATA_WORDS
        and segments[0] not in _FLAG_PREFIXES
    ):
        kind = _fused_suffix_kind(segments[-1:])
    return kind


# Credential words that, ending a run of letters, make it a credential name: "dbpassword",
# "ClearTextPassword", "mysecret", "stripeapikey".
_FUSED_SUFFIXES: Final = ("password", "passwd", "passphrase", "secret", "apikey", "secretkey", "privatekey")


def _fused_suffix_kind(segments: list[str]) -> str | None:
    for segment in reversed(segments):
        for suffix in _FUSED_SUFFIXES:
            if segment.endswith(suffix) and segment != suffix:
                return _FUSED_KINDS.get(suffix, "secret-key")
    return None


def _classify_words(words: list[str]) -> str | None:
    if not words or words[0] in _FLAG_PREFIXES or _PUBLIC_WORDS.intersection(words):
        return None
    if _bundler_credential(words):
        return "credential"
    for index in range(len(words) - 1, -1, -1):
        kind = _concept_at(words, index)
        if kind is None:
            continue
        if any(word in _METADATA_WORDS for word in words[index + 1 :]):
            return None
        return _aws_secret(words, kind)
    return None


def is_sensitive_key(name: str) -> bool:
    """True when ``name`` names a credential (its value must be blanked wholesale)."""
    return classify_key(name) is not None


def _mentions_service(compact: str) -> bool:
    return any(service in compact for service in SERVICE_NAMES)


@functools.lru_cache(maxsize=4096)
def key_context(name: str) -> KeyContext:
    """Tier and placeholder kind for the value assigned to ``name`` in text."""
    kind = classify_key(name)
    if kind is not None:
        return KeyContext(KeyTier.STRONG, kind)
    words = key_words(name)
    if not words or _PUBLIC_WORDS.intersection(words) or words[0] in _FLAG_PREFIXES:
        return _NO_CONTEXT
    if words[-1] in _SHORT_PASSWORD_NAMES:
        # "pw: ...", "db_pw", a lone "pwd" (also the working directory): a password only when the
        # value looks like one (not a path, not a word)
        return KeyContext(KeyTier.EMBEDDED, "password")
    compact = _SEPARATORS_RE.sub("", name[-MAX_KEY_CHARS:].lower())
    if compact.endswith(SERVICE_NAMES):  # the name is the service itself: "plaid", "HEROKU"
        return KeyContext(KeyTier.SERVICE, "secret")
    # Otherwise the last word says what the value is: HEROKU_APP_ID is an id, GITHUB_SHA a digest.
    if words[-1] in _METADATA_WORDS:
        return _NO_CONTEXT
    if _mentions_service(compact):
        return KeyContext(KeyTier.SERVICE, "secret")
    if any(word in compact for word in _EMBEDDED_WORDS):
        return KeyContext(KeyTier.EMBEDDED, "secret")
    if any(fragment in compact for fragment in WEAK_FRAGMENTS):
        return KeyContext(KeyTier.WEAK, "secret")
    return _NO_CONTEXT
