"""Pi skill names and SKILL.md front-matter: sanitise what the server sends, write what Pi accepts.

Pi loads a skill only with a `description` (<= 1024 chars) and expects a `name` of <= 64 chars of
`[a-z0-9-]` without leading, trailing or doubled hyphens. We never copy the server's front-matter
through: only `name` and `description` are written, because other keys (`allowed-tools`,
`disable-model-invocation`) would let server data change what Pi lets the model do.

The reader is deliberately small: flat `key: value` lines with plain, single- or double-quoted
scalars and `|`/`>` block scalars, which is what skill front-matter uses. The writer emits only
double-quoted JSON strings, which are valid YAML, so what we write reads back exactly.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
FENCE = "---"

_NAME_OK = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NOT_NAME_CHAR = re.compile(r"[^a-z0-9]+")
_KEY_LINE = re.compile(r"^([A-Za-z0-9_-]+):(?:\s+(.*))?$")
# C0/C1 controls and Unicode line/paragraph separators: YAML readers treat some as line breaks.
_UNSAFE_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]+")


class FrontMatterError(ValueError):
    pass


def is_valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME_CHARS and bool(_NAME_OK.match(name))


def sanitize_name(raw: str) -> str:
    """Pi's name rules applied to `raw`; "" when nothing usable is left (e.g. a CJK-only name)."""
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii").lower()
    name = _NOT_NAME_CHAR.sub("-", folded).strip("-")
    return name[:MAX_NAME_CHARS].rstrip("-")


def with_suffix(base: str, n: int) -> str:
    """`base-n`, shortening `base` so the result still obeys the 64-char rule."""
    suffix = f"-{n}"
    return base[: MAX_NAME_CHARS - len(suffix)].rstrip("-") + suffix


def clean_description(raw: str) -> str:
    """One line, no control characters, at most 1024 chars (cut with an ellipsis)."""
    text = " ".join(_UNSAFE_CHARS.sub(" ", raw).split())
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return text


@dataclass(frozen=True, slots=True)
class SkillDocument:
    fields: dict[str, str]
    body: str


def split_front_matter(text: str) -> SkillDocument:
    """The front-matter fields and the body. Text without a front-matter block is all body."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        return SkillDocument({}, text)
    for end in range(1, len(lines)):
        if lines[end].rstrip() == FENCE:
            fields = _parse_fields(lines[1:end])
            return SkillDocument(fields, "\n".join(lines[end + 1 :]).lstrip("\n"))
    raise FrontMatterError("the front-matter block is not closed with '---'")


def _parse_fields(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or line[:1].isspace():
            continue  # comments, blank lines and nested values we do not read
        match = _KEY_LINE.match(line)
        if match is None:
            raise FrontMatterError(f"unreadable front-matter line: {line[:80]!r}")
        key, value = match.group(1), (match.group(2) or "").strip()
        if value[:1] in ("|", ">"):
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
                block.append(lines[i].strip())
                i += 1
            joiner = "\n" if value[0] == "|" else " "
            fields[key] = joiner.join(block).strip()
        else:
            fields[key] = _scalar(value)
    return fields


def _scalar(value: str) -> str:
    if value.startswith('"'):
        try:
            decoded = json.loads(value)
        except ValueError:
            raise FrontMatterError(f"bad double-quoted value: {value[:80]!r}") from None
        assert isinstance(decoded, str)  # JSON that starts with '"' and parses whole is a string
        return decoded
    if value.startswith("'"):
        if len(value) < 2 or not value.endswith("'"):
            raise FrontMatterError(f"bad single-quoted value: {value[:80]!r}")
        return value[1:-1].replace("''", "'")
    return value.split(" #", 1)[0].strip()


def render_skill_md(name: str, description: str, body: str) -> str:
    """A SKILL.md Pi loads: validated name, one-line description, then the body unchanged."""
    if not is_valid_name(name):
        raise FrontMatterError(f"{name!r} is not a valid Pi skill name")
    description = clean_description(description)
    if not description:
        raise FrontMatterError("a Pi skill needs a description")
    head = "\n".join(
        [
            FENCE,
            f"name: {json.dumps(name)}",
            f"description: {json.dumps(description, ensure_ascii=False)}",
            FENCE,
        ]
    )
    return f"{head}\n\n{body.rstrip()}\n" if body.strip() else f"{head}\n"
