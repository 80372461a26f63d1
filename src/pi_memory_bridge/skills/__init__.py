"""Skills: the model's read-only skill tools and syncing server skills into Pi's skill directory."""

from pi_memory_bridge.backends.memorycore import MemoryCoreSkillCapture, MemoryCoreSkillSource
from pi_memory_bridge.backends.skills import SkillCaptureApi
from pi_memory_bridge.skills._bundle import SkillBundle, SkillBundleError, fetch_bundle, resource_path_problem
from pi_memory_bridge.skills._capture import CaptureResult, SkillCaptureLedger, skill_messages
from pi_memory_bridge.skills._flow import YES_FLAG, SyncDeps, sync_skills_flow
from pi_memory_bridge.skills._frontmatter import (
    FrontMatterError,
    is_valid_name,
    render_skill_md,
    sanitize_name,
    split_front_matter,
)
from pi_memory_bridge.skills._local import OwnershipRecord, scan
from pi_memory_bridge.skills._source import (
    RemoteSkill,
    RemoteSkillSummary,
    SkillSource,
    list_all_skills,
)
from pi_memory_bridge.skills._sync import Action, install, plan_sync
from pi_memory_bridge.skills._tools import (
    SKILL_READ_TOOL,
    SKILL_SEARCH_TOOL,
    SkillReadArgs,
    SkillSearchArgs,
    skill_read,
    skill_search,
)

__all__ = [
    "SKILL_READ_TOOL",
    "SKILL_SEARCH_TOOL",
    "YES_FLAG",
    "Action",
    "CaptureResult",
    "FrontMatterError",
    "MemoryCoreSkillCapture",
    "MemoryCoreSkillSource",
    "OwnershipRecord",
    "RemoteSkill",
    "RemoteSkillSummary",
    "SkillBundle",
    "SkillBundleError",
    "SkillCaptureApi",
    "SkillCaptureLedger",
    "SkillReadArgs",
    "SkillSearchArgs",
    "SkillSource",
    "SyncDeps",
    "fetch_bundle",
    "install",
    "is_valid_name",
    "list_all_skills",
    "plan_sync",
    "render_skill_md",
    "resource_path_problem",
    "sanitize_name",
    "scan",
    "skill_messages",
    "skill_read",
    "skill_search",
    "split_front_matter",
    "sync_skills_flow",
]
