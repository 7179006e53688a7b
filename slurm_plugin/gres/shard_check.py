"""GPU shard rules of one node's gres.conf lines (``dlgres --check``, called by
:func:`slurm_plugin.gres.check.check_gres` for every node).

Slurm's gres/shard (22.05 on; gres.conf(5) and the "Sharding" section of Slurm's gres
documentation read the same in 22.05, 24.11 and 26.05) splits each GPU into shards:
``Name=shard Count=N File=/dev/nvidiaI`` gives GPU I N shards; a line without ``File`` spreads
its Count evenly over the node's GPUs; a line with ``File`` for several devices spreads its Count
over them. The rules:

* a shard is a share of one of the node's GPUs: a shard line on a node with no ``Name=gpu`` line
  has no GPU to share (slurmd -G of 22.05, 24.11 and 26.05: "we have a shared gres of 'shard' but
  no gres that is sharing", then "fatal: failed to merge SHARED and SHARING configuration");
* a shard line with ``File`` needs GPU lines with ``File`` (else, on all three: "SHARING
  configuration lacks "File" specification", the same fatal), and must name their devices: a
  line with another file is dropped and slurmd starts without its shards ("Discarding
  gres/'shared' configuration (File=/dev/nvidia2) without matching gres/'sharing' record");
* every GPU of the node carries the same number of shards: dlsubmit and dlprio read shards per
  GPU as the node's shard count / its GPU count (slurm_plugin/shard.py), so a fraction of a GPU
  is the same count of shards wherever the job lands. This is the product's rule, not slurmd's.
"""

from __future__ import annotations

from typing import Protocol

from slurm_plugin.gres.conf import GresLine
from slurm_plugin.gres.slurm_lines import Where


class Report(Protocol):
    def add(self, line: Where, message: str, node: str | None = None) -> None: ...


def node_rules(node: str, lines: list[GresLine], autodetect: str, rep: Report) -> None:
    """Add the findings of one node's usable GRES ``lines`` (file order) to ``rep``.
    ``autodetect``: the node's AutoDetect value (``off`` when none: GPUs come only from lines)."""
    shards = [r for r in lines if r.name == "shard"]
    if not shards:
        return
    gpus = [r for r in lines if r.name == "gpu"]
    if not gpus:
        if autodetect == "off":
            rep.add(shards[0].where, "{nodes}: Name=shard but no Name=gpu line: a shard is a share of one of "
                                    "the node's GPUs (slurmd stops: 'failed to merge SHARED and SHARING "
                                    "configuration'); give the GPU lines too (dlgres --shards N writes both)", node)
        return
    gpu_files = [f for r in gpus for f in (r.files or ())]
    kept = []   # the shard lines slurmd keeps
    for r in shards:
        if r.files is None:
            kept.append(r)
            continue
        if len(gpu_files) < len(gpus):
            rep.add(r.where, "{nodes}: Name=shard gives File= but the node's Name=gpu lines do not: slurmd "
                            "stops ('SHARING configuration lacks File specification'); give File= on the "
                            "GPU lines (dlgres writes them)", node)
            return
        strangers = [f for f in r.files if f not in gpu_files]
        if strangers:
            rep.add(r.where, f"{{nodes}}: Name=shard File={strangers[0]} is no device of the node's Name=gpu "
                            "lines: slurmd drops the line ('Discarding gres/'shared' configuration "
                            f"(File={r.fields.get('file', '')}) without matching gres/'sharing' record') and starts "
                            "without its shards; name one of the GPU files", node)
            continue   # dropped: the GPUs carry the other lines' shards, checked below
        kept.append(r)
    if kept:
        _even(node, kept, gpu_files, sum(len(r.files) if r.files else r.count for r in gpus), rep)


def _even(node: str, shards: list[GresLine], gpu_files: list[str], gpu_count: int, rep: Report) -> None:
    """Every GPU of the node has the same shards (see the module docstring)."""
    per_file: dict[str, float] = dict.fromkeys(gpu_files, 0.0)
    spread = 0.0
    for r in shards:
        if r.files is None:
            spread += r.count / max(gpu_count, 1)
        else:
            for f in r.files:
                per_file[f] = per_file.get(f, 0.0) + r.count / len(r.files)
    counts = sorted({c + spread for c in per_file.values()} or {spread})
    total = sum(r.count for r in shards)
    if len(counts) > 1 or counts[0] != int(counts[0]):
        shown = ", ".join(f"{c:g}" for c in counts)
        rep.add(shards[0].where, f"{{nodes}}: the GPUs carry different shard counts ({shown}; {total} shards "
                                f"over {gpu_count} GPUs): dlsubmit and dlprio take shards per GPU as the "
                                "node's shards / its GPUs; give every GPU the same Count (dlgres --shards N)",
                node)
