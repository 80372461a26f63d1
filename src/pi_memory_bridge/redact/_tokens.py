"""Credential formats recognisable on their own, by a vendor prefix or a fixed structure.

Written from the vendors' published token formats. Lengths are deliberately a little looser than
the formats (``{30,}`` rather than ``{36}``): a slightly malformed key is still a key. Entries
whose prefix could also start an ordinary word carry a validator on the matched text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ._shapes import looks_random


def _random(min_length: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return looks_random(value, min_length=min_length)

    return check


def _mixed_case(value: str) -> bool:
    return any(char.isupper() for char in value) and any(char.islower() for char in value)


def _textured(value: str) -> bool:
    # Short prefixes such as "xoxo-" also start ordinary words; real tokens carry digits or
    # mixed case after the prefix.
    body = value.partition("-")[2]
    return any(char.isdigit() for char in body) or _mixed_case(body)


@dataclass(frozen=True, slots=True)
class TokenFormat:
    kind: str
    pattern: str  # RE2 syntax; may hold one named group "secret" for the part to replace
    accept: Callable[[str], bool] | None = None  # called on the replaced text


TOKEN_FORMATS: Final[tuple[TokenFormat, ...]] = (
    # AI providers. MemoryCore and Anthropic first: they share the "sk-" prefix.
    TokenFormat("memorycore-key", r"sk-mem-[A-Za-z0-9_-]{8,}"),
    TokenFormat("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    TokenFormat("openai-key", r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"),
    TokenFormat("openai-key", r"sk-[A-Za-z0-9]{8,}T3BlbkFJ[A-Za-z0-9]{8,}"),
    TokenFormat("api-key", r"sk-[A-Za-z0-9_-]{20,}", _random(20)),
    TokenFormat("google-api-key", r"AIza[A-Za-z0-9_-]{30,}"),
    TokenFormat("google-oauth-token", r"ya29\.[A-Za-z0-9_-]{20,}"),
    TokenFormat("google-client-secret", r"GOCSPX-[A-Za-z0-9_-]{20,}"),
    TokenFormat("groq-key", r"gsk_[A-Za-z0-9]{20,}"),
    TokenFormat("xai-key", r"xai-[A-Za-z0-9]{40,}", _random(40)),
    TokenFormat("perplexity-key", r"pplx-[A-Za-z0-9]{32,}"),
    TokenFormat("huggingface-token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", _mixed_case),
    TokenFormat("replicate-token", r"r8_[A-Za-z0-9]{30,}"),
    # Code hosting and package registries.
    TokenFormat("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    TokenFormat("github-token", r"github_pat_[A-Za-z0-9_]{40,}"),
    TokenFormat("gitlab-token", r"gl(?:pat|dt|ft|rt|soat|imt|agent|oas|ffct|ptt|cbt)-[A-Za-z0-9_.-]{20,}"),
    TokenFormat("gitlab-token", r"GR1348941[A-Za-z0-9_-]{20,}"),
    TokenFormat("gitlab-session", r"_gitlab_session=[0-9a-z]{32}"),
    TokenFormat("npm-token", r"(?i:npm_)[A-Za-z0-9]{36,}"),
    TokenFormat("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    TokenFormat("rubygems-key", r"rubygems_[0-9a-f]{48}"),
    TokenFormat("clojars-token", r"(?i:clojars_)[A-Za-z0-9]{60}"),
    TokenFormat("artifactory-key", r"AKCp[A-Za-z0-9]{60,}"),
    TokenFormat("artifactory-key", r"cmVmd[A-Za-z0-9]{59}\b"),
    TokenFormat("readme-key", r"rdme_[a-z0-9]{70}"),
    TokenFormat("sourcegraph-token", r"(?i:sgp_)(?:[0-9a-fA-F]{16}_|(?i:local)_)?[0-9a-fA-F]{40}"),
    # Chat and messaging.
    TokenFormat("slack-token", r"(?i:xox[abposer]-|xoxe\.xox[bp]-|xapp-)[A-Za-z0-9-]{6,}", _textured),
    # Webhook URLs are credentials as a whole; the host is replaced too.
    TokenFormat("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}"),
    TokenFormat("discord-webhook", r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,}"),
    TokenFormat("teams-webhook", r"[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{40,}"),
    TokenFormat("telegram-bot-token", r"[0-9]{5,16}:A[A-Za-z0-9_-]{34}"),
    TokenFormat("twilio-key", r"SK[0-9a-fA-F]{32}\b"),
    TokenFormat("sendgrid-key", r"SG\.[A-Za-z0-9_=.-]{40,}"),
    TokenFormat("brevo-key", r"x(?:keysib|smtpsib)-[0-9a-f]{64}-[A-Za-z0-9]{16}"),
    TokenFormat("mailgun-key", r"(?:pub)?key-[0-9a-fA-F]{32}\b"),
    TokenFormat("mailchimp-key", r"[0-9a-fA-F]{32}-us[0-9]{1,2}\b"),
    TokenFormat("facebook-token", r"EAA[CM][A-Za-z0-9]{100,}"),
    TokenFormat("facebook-token", r"[0-9]{15,16}[|%][A-Za-z0-9_-]{27,40}"),
    TokenFormat("twitter-bearer-token", r"A{22}[A-Za-z0-9%]{80,}"),
    # Cloud providers and infrastructure.
    TokenFormat("aws-access-key-id", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    TokenFormat("aws-bedrock-key", r"ABSK[A-Za-z0-9+/]{100,}={0,2}"),
    TokenFormat("aws-bedrock-key", r"bedrock-api-key-[A-Za-z0-9+/=]{20,}"),
    TokenFormat("azure-client-secret", r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"),
    TokenFormat("alibaba-key", r"LTAI[A-Za-z0-9]{12,20}\b", _random(16)),
    TokenFormat("digitalocean-token", r"(?i:do[opr]_v1_)[0-9a-fA-F]{64}"),
    TokenFormat("cloudflare-origin-key", r"v1\.0-[0-9a-f]{24}-[0-9a-f]{146}"),
    TokenFormat("flyio-token", r"fo1_[A-Za-z0-9_-]{43}"),
    TokenFormat("flyio-token", r"fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}"),
    TokenFormat("heroku-key", r"HRKU-AA[A-Za-z0-9_-]{58}"),
    TokenFormat("vault-token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    TokenFormat("vault-token", r"s\.[A-Za-z0-9]{24}\b", _random(26)),
    TokenFormat("terraform-token", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    TokenFormat("pulumi-token", r"pul-[0-9a-f]{40}"),
    TokenFormat("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    TokenFormat("databricks-token", r"dapi[0-9a-f]{32}(?:-[0-9])?"),
    TokenFormat("dynatrace-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    TokenFormat("grafana-token", r"(?i:eyJrIjoi)[A-Za-z0-9]{70,}={0,3}"),
    TokenFormat("grafana-token", r"(?i:glc_)[A-Za-z0-9+/]{32,}={0,3}"),
    TokenFormat("grafana-token", r"(?i:glsa_)[A-Za-z0-9]{32}_[0-9a-fA-F]{8}"),
    TokenFormat("newrelic-key", r"(?i:NR(?:AK|II|JS|AA))-[A-Za-z0-9-]{19,}"),
    TokenFormat("openshift-token", r"sha256~[A-Za-z0-9_-]{43}"),
    TokenFormat("planetscale-token", r"(?i:pscale_(?:tkn|oauth|pw)_)[A-Za-z0-9_.=-]{32,}"),
    TokenFormat("scalingo-token", r"tk-us-[A-Za-z0-9_-]{48}"),
    TokenFormat("prefect-key", r"pnu_[A-Za-z0-9]{36}"),
    TokenFormat("sentry-token", r"sntry[us]_[A-Za-z0-9+/=_]{40,}"),
    TokenFormat("harness-token", r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    TokenFormat("clickhouse-key", r"4b1d[A-Za-z0-9]{38}\b", _random(42)),
    TokenFormat("octopus-key", r"API-[A-Z0-9]{26}\b", _random(30)),
    TokenFormat("infracost-token", r"ico-[A-Za-z0-9]{32}"),
    TokenFormat("defined-networking-token", r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),
    TokenFormat("1password-token", r"ops_eyJ[A-Za-z0-9+/=]{100,}"),
    TokenFormat(
        "1password-secret-key", r"A3-[A-Z0-9]{6}-[A-Z0-9]{6}-?[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"
    ),
    TokenFormat("age-secret-key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    # Payments, commerce and SaaS.
    TokenFormat("stripe-key", r"(?:sk|rk|pk)_(?:test|live|prod)_[A-Za-z0-9]{10,}"),
    TokenFormat("stripe-key", r"whsec_[A-Za-z0-9+/=]{20,}"),
    TokenFormat("square-token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    TokenFormat("square-token", r"EAAA[A-Za-z0-9_-]{22,60}", _random(26)),
    TokenFormat("shopify-token", r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}"),
    TokenFormat("shippo-token", r"shippo_(?:live|test)_[0-9a-fA-F]{40}"),
    TokenFormat("duffel-token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    TokenFormat("easypost-key", r"EZ[AT]K[A-Za-z0-9]{54}"),
    TokenFormat("flutterwave-key", r"FLW(?:SECK|PUBK)_TEST-[A-Za-z0-9]{12,}(?:-X)?"),
    TokenFormat(
        "plaid-token", r"(?i:access-(?:sandbox|development|production)-)[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}"
    ),
    TokenFormat("lob-key", r"(?i:live|test)_(?i:pub_)?[0-9a-fA-F]{31,35}\b"),
    TokenFormat("postman-key", r"PMAK-[0-9a-fA-F]{24}-[0-9a-fA-F]{34}"),
    TokenFormat("linear-key", r"lin_api_[A-Za-z0-9]{40}"),
    TokenFormat("notion-token", r"ntn_[A-Za-z0-9]{40,}"),
    TokenFormat("notion-token", r"secret_[A-Za-z0-9]{43}\b", _random(43)),
    TokenFormat("typeform-token", r"tfp_[A-Za-z0-9_.=-]{59}"),
    TokenFormat("mapbox-token", r"[ps]k\.[A-Za-z0-9]{50,}\.[A-Za-z0-9_-]{20,}"),
    TokenFormat("yandex-token", r"t1\.[A-Za-z0-9_-]+=*\.[A-Za-z0-9_-]{86}=*"),
    TokenFormat("yandex-key", r"AQVN[A-Za-z0-9_-]{35,38}"),
    TokenFormat("dropbox-token", r"sl\.[A-Za-z0-9_=-]{130,}"),
    TokenFormat("adobe-secret", r"p8e-[A-Za-z0-9]{32}"),
    TokenFormat("airtable-token", r"pat[A-Za-z0-9]{14}\.[0-9a-f]{64}"),
    TokenFormat("atlassian-token", r"(?i:ATATT3)[A-Za-z0-9_=-]{100,}"),
    TokenFormat(
        "authress-key",
        r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}"
        r"\.[A-Za-z0-9+/_=-]{30,}",
    ),
    TokenFormat("frameio-token", r"fio-u-[A-Za-z0-9_=-]{64}"),
    TokenFormat("maxmind-key", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    TokenFormat("intra42-secret", r"s-s4t2(?:ud|af)-[0-9a-fA-F]{64}"),
    TokenFormat("settlemint-token", r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}"),
    # Structured tokens: JWTs (and base64-wrapped JWTs).
    TokenFormat("jwt", r"ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_/\\-]{10,}\.[A-Za-z0-9_/\\+=-]*"),
    TokenFormat("jwt", r"ZXlK[A-Za-z0-9+/_\\-]{40,}={0,2}"),
)
