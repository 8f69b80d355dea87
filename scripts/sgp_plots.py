"""Shared reading and drawing helpers for scripts/plot-run (one run) and scripts/plot (a sweep).

Run files (see docs/run-directory.md): peer-<rank>.jsonl, monitor.jsonl, summary.csv.
Everything here is headless (matplotlib's Agg backend) and uses colours and line styles that stay
distinguishable when printed in grey (viridis + distinct markers and dash patterns).
"""
import csv
import glob
import json
import os

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported for the scripts)
import numpy as np  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
CONSENSUS_LABEL = "relative consensus error  mean ||z_i - zbar||² / ||zbar||²"


def read_jsonl(path):
    """The JSON objects of a JSONL file, one per non-empty line ([] when the file is missing)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def peer_logs(run_dir):
    """{rank: records} of every peer-<rank>.jsonl in a run directory, by rank."""
    logs = {}
    for path in glob.glob(os.path.join(run_dir, "peer-*.jsonl")):
        rank = os.path.basename(path)[len("peer-"):-len(".jsonl")]
        if rank.isdigit():
            logs[int(rank)] = read_jsonl(path)
    return dict(sorted(logs.items()))


def eval_records(records):
    """The records of a peer log written at evaluation points (those with test_accuracy)."""
    return [r for r in records if "test_accuracy" in r]


def wall_time_at(logs, iterations):
    """Seconds since start at each iteration: the mean over peers of their logged wall_time,
    interpolated linearly between logged iterations."""
    curves = []
    for records in logs.values():
        points = [(r["iteration"], r["wall_time"]) for r in records if "wall_time" in r]
        if points:
            xs, ys = zip(*sorted(points))
            curves.append(np.interp(iterations, xs, ys))
    return np.mean(curves, axis=0) if curves else np.full(len(iterations), np.nan)


def read_csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def style(index, count):
    """Colour (viridis), marker and line style of the index-th of `count` categorical series."""
    colour = matplotlib.colormaps["viridis"](0.9 * index / max(count - 1, 1))
    return dict(color=colour, marker=MARKERS[index % len(MARKERS)],
                linestyle=LINESTYLES[index % len(LINESTYLES)])


def save_figure(fig, base_path, *more_base_paths):
    """Writes BASE.png and BASE.pdf for the base path and each of more_base_paths; returns the
    first PNG path."""
    if fig.get_layout_engine() is None:  # figures made with layout="constrained" lay out themselves
        fig.tight_layout()
    for base in (base_path, *more_base_paths):
        for ext in ("png", "pdf"):
            fig.savefig(f"{base}.{ext}", dpi=120)
    plt.close(fig)
    return f"{base_path}.png"


def shrink_png(path):
    """Rewrites a PNG as 64 palette colours: about a quarter of matplotlib's RGBA size, for
    figures that are committed (experiments/figures/)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)
    return path
