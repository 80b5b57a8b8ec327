"""Configuration: the schema with every default, and the loader that validates it."""

from teleton.config.loader import (
    ConfigError,
    default_config_path,
    load_config,
    read_config_file,
    require_llm,
    require_private_config,
    require_telegram,
    write_config,
    write_private_file,
)
from teleton.config.schema import Config

__all__ = [
    "Config",
    "ConfigError",
    "default_config_path",
    "load_config",
    "read_config_file",
    "require_llm",
    "require_private_config",
    "require_telegram",
    "write_config",
    "write_private_file",
]
