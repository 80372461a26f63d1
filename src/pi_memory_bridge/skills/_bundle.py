"""One server skill fetched completely and checked: SKILL.md and its resource files, decoded.

Every limit is checked on the decoded bytes we would write, never on sizes the server reports,
and base64 is decoded strictly. Resource paths are refused unless they are plain relative paths
that cannot leave the skill directory or shadow SKILL.md / our ownership record on a
case-insensitive file system.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from pi_memory_bridge.skills._source import RemoteSkill, SkillSource

SKILL_FILE = "SKILL.md"
RECORD_FILE = ".pi-memory-bridge.json"
MAX_SKILL_MD_BYTES = 1024 * 1024
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TOTAL_BYTES = 20 * 1024 * 1024
MAX_FILES = 100
MAX_PATH_CHARS = 512

_TEXT_EXTENSIONS = frozenset(
    "md txt sh bash yaml yml json ts js mjs sql env conf toml ini py csv xml html css".split()
)
_BAD_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f\\:]")


class SkillBundleError(ValueError):
    """The server's skill cannot be written safely; nothing of it is written."""


def resource_path_problem(path: str) -> str | None:
    """Why `path` is not an acceptable resource path, or None when it is."""
    if not path or len(path) > MAX_PATH_CHARS:
        return "empty or too long"
    if _BAD_PATH_CHARS.search(path):
        return "contains a control character, a backslash or a colon"
    if path.startswith("/"):
        return "is absolute"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "has an empty, '.' or '..' segment"
    if parts[0].casefold() in (SKILL_FILE.casefold(), RECORD_FILE.casefold()):
        return "would replace SKILL.md or the ownership record"
    if any(p.startswith(".pmb-") for p in parts):
        return "uses a name reserved for staging"
    return None


def _wants_text(path: str, mime_type: str) -> bool:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return mime_type.startswith("text/") or ext in _TEXT_EXTENSIONS


@dataclass(frozen=True, slots=True)
class SkillBundle:
    skill_id: str
    name: str  # as the server calls it
    description: str
    version: int
    skill_md: str  # the server's SKILL.md text (front-matter is rewritten on install)
    files: tuple[tuple[str, bytes], ...]  # (relative path, decoded bytes)

    @property
    def total_bytes(self) -> int:
        return len(self.skill_md.encode("utf-8")) + sum(len(b) for _, b in self.files)


def _decode(path: str, content: str, encoding: str) -> bytes:
    if encoding == "utf-8":
        return content.encode("utf-8")
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise SkillBundleError(f"resource {path!r}: invalid base64 content") from None


async def fetch_bundle(source: SkillSource, skill_id: str) -> SkillBundle:
    """Fetch and check one skill. Raises `SkillBundleError` or a `BackendError`."""
    skill: RemoteSkill = await source.get_skill(skill_id)
    if skill.content is None or not skill.content.strip():
        raise SkillBundleError(f"skill {skill_id} has no SKILL.md content on the server")
    md_bytes = len(skill.content.encode("utf-8"))
    if md_bytes > MAX_SKILL_MD_BYTES:
        raise SkillBundleError(f"SKILL.md is {md_bytes} bytes, over the {MAX_SKILL_MD_BYTES}-byte limit")
    if len(skill.manifest) > MAX_FILES:
        raise SkillBundleError(f"{len(skill.manifest)} resource files, over the limit of {MAX_FILES}")
    total = md_bytes
    files: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for entry in skill.manifest:
        problem = resource_path_problem(entry.path)
        if problem is not None:
            raise SkillBundleError(f"resource path {entry.path!r} refused: {problem}")
        if entry.path.casefold() in seen:
            raise SkillBundleError(f"resource path {entry.path!r} appears twice (ignoring case)")
        seen.add(entry.path.casefold())
        encoding = "utf-8" if _wants_text(entry.path, entry.mime_type) else "base64"
        remote = await source.read_file(skill_id, entry.path, encoding)
        data = _decode(entry.path, remote.content, remote.encoding)
        if len(data) > MAX_FILE_BYTES:
            raise SkillBundleError(f"resource {entry.path!r} is {len(data)} bytes, over {MAX_FILE_BYTES}")
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise SkillBundleError(f"the skill's files add up to over {MAX_TOTAL_BYTES} bytes")
        files.append((entry.path, data))
    # Directories and files sharing a name ("a" and "a/b") cannot both be written.
    dirs = {"/".join(p.split("/")[:i]).casefold() for p, _ in files for i in range(1, p.count("/") + 1)}
    clash = next((p for p, _ in files if p.casefold() in dirs), None)
    if clash is not None:
        raise SkillBundleError(f"resource {clash!r} is both a file and a directory")
    return SkillBundle(
        skill.skill_id, skill.name, skill.description, skill.version, skill.content, tuple(files)
    )
