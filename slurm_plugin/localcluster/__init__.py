"""``dlcluster``: a real local Slurm cluster with fake GPUs. :mod:`.cluster` (its spec and
config files), :mod:`.provision` (packages, daemons, the shell scripts in ``provision/``),
:mod:`.rootfs` (another Slurm release from a Debian root filesystem), :mod:`.cli` (the
command)."""
