"""gres.conf lines for GPUs (Slurm gres.conf(5)): one line per GPU with ``Cores=`` and ``Links=``.

``dlcluster`` writes its fake GPUs' gres.conf through :func:`fake_gres_lines`.
"""

from __future__ import annotations

from collections.abc import Sequence


def fake_gres_lines(
    node_names: str,
    device_paths: Sequence[str],
    gpu_type: str | None,
    sockets: int,
    cores_per_socket: int,
) -> list[str]:
    """gres.conf lines for a node shape with ``len(device_paths)`` GPUs spread evenly over sockets.

    GPU ``i`` sits on socket ``i // (n / sockets)``; its ``Cores=`` are that socket's logical core
    indices; ``Links=`` gives ``-1`` for itself, 4 (NVLink-like) to GPUs on the same socket and 1
    (PCIe/SMP) across sockets, as gres.conf(5) expects (one entry per GPU, in ``File`` order).

    Args:
        node_names: a Slurm hostlist such as ``node[1-4]``.
        device_paths: character-device paths, one per GPU, in index order.
        gpu_type: GRES type (``a100``) or None for untyped GPUs.
        sockets, cores_per_socket: the node's shape.
    Raises:
        ValueError: no GPUs, or GPUs not divisible over the sockets.
    """
    n = len(device_paths)
    if n == 0 or sockets < 1 or n % sockets:
        raise ValueError(f"{n} GPUs cannot be spread evenly over {sockets} sockets")
    per_socket = n // sockets
    lines = []
    for i, path in enumerate(device_paths):
        sock = i // per_socket
        first = sock * cores_per_socket
        cores = f"{first}-{first + cores_per_socket - 1}"
        links = ",".join(
            "-1" if j == i else ("4" if j // per_socket == sock else "1") for j in range(n)
        )
        typ = f" Type={gpu_type}" if gpu_type else ""
        lines.append(f"NodeName={node_names} Name=gpu{typ} File={path} Cores={cores} Links={links}")
    return lines
