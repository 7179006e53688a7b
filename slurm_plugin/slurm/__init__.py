"""Talking to Slurm: :mod:`.client` (the one module that runs Slurm's commands: argv lists,
never a shell, typed errors), :mod:`.records` (the job, node and partition records it returns),
:mod:`.shapes` (the JSON shapes of each supported Slurm release) and :mod:`.accounting`
(``sacct`` records)."""
