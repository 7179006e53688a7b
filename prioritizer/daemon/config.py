"""The daemon's configuration: :mod:`prioritizer.config_file`, where the declaration lives so
that the simulator's commands check a ``--config`` file by the same rules without importing the
daemon; re-exported here under the name the daemon's modules use."""

from prioritizer.config_file import (PACKAGED_PATH, SYSTEM_PATH, ConfigError, DaemonConfig,
                                     default_path, from_mapping, load)

__all__ = ["ConfigError", "DaemonConfig", "PACKAGED_PATH", "SYSTEM_PATH", "default_path",
           "from_mapping", "load"]
