"""Where dlprio's files are by default: constants only, so that ``dlqueue`` (which reads the
snapshot on every start), the daemon and the config file's declaration
(:mod:`prioritizer.config_file`) share one copy without importing each other."""

import os

#: The daemon configuration a site installs; without it the packaged ``conf/dlprio.yaml``.
SYSTEM_CONFIG = "/etc/dlprio/dlprio.yaml"
#: The world-readable snapshot the daemon writes for ``dlqueue`` (``snapshot_path``).
SNAPSHOT = "/var/lib/dlprio/snapshot.json"
#: The files SQLite keeps beside the ledger (https://sqlite.org/tempfiles.html: write-ahead
#: log, its shared-memory index, rollback journal), as suffixes of ``ledger_path``.
SQLITE_SIDES = ("-wal", "-shm", "-journal")
#: The suffix of the daemon's lock file beside the ledger (:mod:`prioritizer.daemon.lock`).
LOCK_SUFFIX = ".lock"


def present(path: str | os.PathLike[str]) -> bool:
    """Whether anything is at ``path``: a file, or a link to nothing, or one this user may not
    look into (its read then fails naming it, rather than a default silently standing in for
    the file the site put there). Only "no such file" is absence."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:   # EACCES on a directory above, ENOTDIR, ELOOP
        return True
    return True


def beside(config_file: str | os.PathLike[str], path: str) -> str:
    """A file path read from ``config_file``, a relative one taken from the config file's
    directory: the daemon (its service unit runs in ``/``), ``dlprio status`` and ``dlqueue``
    run from different working directories and must all name the same ledger and snapshot.
    An absolute path is returned as it is."""
    if os.path.isabs(path):
        return path
    return os.path.join(os.path.dirname(os.path.abspath(config_file)), path)
