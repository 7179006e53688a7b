"""Where dlprio's files are by default: constants only, so that ``dlqueue`` (which reads the
snapshot on every start), the daemon and the config file's declaration
(:mod:`prioritizer.config_file`) share one copy without importing each other."""

#: The daemon configuration a site installs; without it the packaged ``conf/dlprio.yaml``.
SYSTEM_CONFIG = "/etc/dlprio/dlprio.yaml"
#: The world-readable snapshot the daemon writes for ``dlqueue`` (``snapshot_path``).
SNAPSHOT = "/var/lib/dlprio/snapshot.json"
