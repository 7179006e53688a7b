"""What every tiresias-slurm command and package shares, and nothing else: exit codes and the
CLI error (:mod:`.exits`), the argument parser and safe printing (:mod:`.cli`), atomic writes
(:mod:`.atomic`), bounded file reads (:mod:`.readfile`), the one YAML reader (:mod:`.yamlfile`)
and the one wording of msgspec's errors (:mod:`.wording`).

It sits in ``slurm_plugin`` because that package is the lowest layer of the import contracts
(pyproject.toml: submit above prioritizer above slurm_plugin), so all three may import it; a
contract keeps it from importing anything else of the project, so it runs no Slurm command and
pulls in nothing heavy.
"""
