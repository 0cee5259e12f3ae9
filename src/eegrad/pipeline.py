"""Run a configured experiment into a results folder: CSV, figure, metadata."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ._extras import missing_extra

try:
    from tqdm.auto import tqdm
except ImportError as exc:  # the 'cli' extra
    raise missing_extra(exc, "eegrad.pipeline (its progress bar)") from exc

from .config import ExperimentConfig, config_to_dict
from .results import environment, write_json, write_table
from .studies import Study, run_study, study_work

__all__ = ["run_to_folder"]


def run_to_folder(
    cfg: ExperimentConfig, out: str | Path, *, quiet: bool = False, command: str = ""
) -> Study:
    """Run ``cfg`` and write ``{name}.csv``, ``{name}.png``, ``{name}.pdf`` and
    ``metadata.json`` into ``out``. Nothing is written if the configuration fails to build."""
    out = Path(out)
    start = time.perf_counter()
    with tqdm(total=study_work(cfg), disable=quiet, file=sys.stderr, unit="rr",
              unit_scale=True, desc=cfg.name, leave=False) as bar:  # fmt: skip
        study = run_study(cfg, progress=bar.update)
    wall = time.perf_counter() - start
    write_table(out / f"{cfg.name}.csv", study.rows, study.columns)
    for stem, (rows, columns) in study.tables.items():
        write_table(out / f"{stem}.csv", rows, columns)
    from .plots import plot_study, save_figure  # Matplotlib is imported only when needed

    fig = plot_study(study)
    save_figure(fig, out / cfg.name)
    write_json(
        out / "metadata.json",
        {
            "name": cfg.name,
            "study": cfg.study,
            "seed": cfg.seed,
            "config": config_to_dict(cfg),
            "defaults_note": (
                "The paper does not state alpha, beta, P or c; unless configured otherwise "
                "eegrad uses alpha = 2.5, beta = max sigma_n^2 and P = S(w) of the current "
                "iterate (both 'oracle', supplied by the simulator) and c = 1."
            ),
            "command": command,
            "wall_time_s": round(wall, 3),
            "environment": environment(),
            "files": [
                f"{cfg.name}.csv",
                *(f"{t}.csv" for t in study.tables),
                f"{cfg.name}.png",
                f"{cfg.name}.pdf",
            ],
        },
    )
    return study
