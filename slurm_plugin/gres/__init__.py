"""``dlgres``: gres.conf for GPU nodes. :mod:`.generate` (the lines, from a topology),
:mod:`.nvml` / :mod:`.nvml_fake` (the GPUs of this node, or a recorded NVML), :mod:`.topo` /
:mod:`.topo_cpu` (``nvidia-smi topo -m`` captures and the CPU topology), :mod:`.conf` /
:mod:`.slurmconf` (reading gres.conf and slurm.conf), :mod:`.check` and :mod:`.release` (the
gres.conf(5) rules of each Slurm release), :mod:`.cli` (the command)."""
