"""``dlprio tune --plot``: avg JCT over the grid: a heat map for two varied parameters, lines
for one (or for the first against the others' combinations); matplotlib's Agg backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prioritizer.grid import label
from slurm_plugin.common.atomic import save_figure


def _text(v: Any) -> str:
    return label({"x": v})[2:]


def write_plot(grid: Mapping[str, list[Any]], settings: Sequence[Mapping[str, Any]],
               figures: Sequence[Mapping[str, float]], path: str) -> None:
    """Write the plot of ``figures[i]['avg_jct_s']`` for ``settings[i]`` to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    varied = [k for k, v in grid.items() if len(v) > 1] or list(grid)[:1]
    avg = {tuple(_text(s[k]) for k in varied): f["avg_jct_s"] for s, f in zip(settings, figures)}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if len(varied) == 2:
        xs = [_text(v) for v in grid[varied[0]]]
        ys = [_text(v) for v in grid[varied[1]]]
        data = [[min(v for k, v in avg.items() if k[0] == x and k[1] == y) for x in xs] for y in ys]
        im = ax.imshow(data, cmap="viridis_r", aspect="auto")
        ax.set_xticks(range(len(xs)), xs)
        ax.set_yticks(range(len(ys)), ys)
        ax.set_xlabel(varied[0])
        ax.set_ylabel(varied[1])
        for i, row in enumerate(data):
            for j, value in enumerate(row):
                ax.text(j, i, f"{value:,.0f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(im, ax=ax, label="avg JCT s")
    else:
        xs = [_text(v) for v in grid[varied[0]]]
        groups: dict[tuple[str, ...], list[float]] = {}
        for key, value in avg.items():
            groups.setdefault(key[1:], []).append(value)
        for rest, values in sorted(groups.items()):
            name = " ".join(f"{k}={v}" for k, v in zip(varied[1:], rest))
            ax.plot(xs, values, marker="o", label=name or "avg JCT")
        ax.set_xlabel(varied[0])
        ax.set_ylabel("avg JCT s")
        if len(groups) > 1:
            ax.legend(fontsize=7)
    ax.set_title("dlprio tune: avg JCT over the grid")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
