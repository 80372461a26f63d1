"""Configuration: models, sources and their precedence, key files, and the rules around them.

Sources, lowest to highest priority: built-in defaults < global file
`<agent_dir>/memory-bridge/config.json` < project file `<cwd>/.pi/memory-bridge.json` (only when
the global file sets `allowProjectConfig: true` and Pi trusts the project; recall keys only, and
only to make recall cheaper) < environment variables. Objects merge key by key. Keys come from
`TDAI_MEMORY_USER_KEY`/`TDAI_MEMORY_GATEWAY_API_KEY` or from key files, and are never written.

`load_config` never raises on bad input: every problem is reported by key and source, and the
returned config is the safe one to run with (see `_loader` for what "safe" means per source).
"""

from pi_memory_bridge.config._endpoint import endpoint_problem, is_loopback_host
from pi_memory_bridge.config._jsonfile import MAX_CONFIG_FILE_BYTES, read_json_object
from pi_memory_bridge.config._keyfile import MAX_KEY_FILE_BYTES, read_key_file
from pi_memory_bridge.config._loader import LoadedConfig, Secrets, load_config
from pi_memory_bridge.config._models import (
    SCHEMA_VERSION,
    BridgeConfig,
    CaptureSettings,
    LearningSettings,
    MemoryCoreSettings,
    RecallSettings,
    SkillSettings,
)
from pi_memory_bridge.config._paths import (
    data_dir,
    default_agent_dir,
    expand_home,
    global_config_path,
    project_config_path,
)
from pi_memory_bridge.config._problems import ConfigProblem, ConfigSource, problems_from_validation
from pi_memory_bridge.config._writer import write_global_config

__all__ = [
    "MAX_CONFIG_FILE_BYTES",
    "MAX_KEY_FILE_BYTES",
    "SCHEMA_VERSION",
    "BridgeConfig",
    "CaptureSettings",
    "ConfigProblem",
    "ConfigSource",
    "LearningSettings",
    "LoadedConfig",
    "MemoryCoreSettings",
    "RecallSettings",
    "Secrets",
    "SkillSettings",
    "data_dir",
    "default_agent_dir",
    "endpoint_problem",
    "expand_home",
    "global_config_path",
    "is_loopback_host",
    "load_config",
    "problems_from_validation",
    "project_config_path",
    "read_json_object",
    "read_key_file",
    "write_global_config",
]
