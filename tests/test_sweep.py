"""Sweeps: deterministic across executors and job counts, resumable after SIGKILL, refused
when the sweep changed, and validated."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from eegrad.cli import main as cli
from eegrad.config import ConfigError
from eegrad.sweep import _merge_mean_se, load_sweep, run_sweep

SWEEP = """
name = "t"
seed = 3
realizations = {R}
chunk = {chunk}

[base]
study = "rules"
T = [20, 80]
w = [1.0, 1.0]
profiles = [{{ name = "p", sigma2 = [3.0, 2.0, 1.0] }}]

[axes]
selector = [{{ rule = "eegrad", c = 1.0, label = "ee" }}, {{ rule = "thompson" }}, {{ rule = "kl_lcb" }}]
"""


def write(tmp_path: Path, R=60, chunk=20, name="s.toml") -> Path:
    path = tmp_path / name
    path.write_text(SWEEP.format(R=R, chunk=chunk))
    return path


def test_merge_of_chunks_equals_the_whole():
    x = np.random.default_rng(0).exponential(size=1000)
    parts = np.split(x, [100, 250, 700])
    means = [p.mean() for p in parts]
    ses = [p.std(ddof=1) / np.sqrt(len(p)) for p in parts]
    m, se = _merge_mean_se(means, ses, [len(p) for p in parts])
    assert m == pytest.approx(x.mean(), rel=1e-12)
    assert se == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)), rel=1e-10)


def test_same_table_whatever_the_executor(tmp_path):
    sweep = load_sweep(write(tmp_path))
    tables = []
    for label, kwargs in (("j1", {"jobs": 1}), ("j2", {"jobs": 2}),
                          ("dask", {"executor": "dask", "jobs": 2})):  # fmt: skip
        if label == "dask":
            pytest.importorskip("distributed")
        run_sweep(sweep, tmp_path / label, quiet=True, **kwargs)
        tables.append((tmp_path / label / "results.csv").read_bytes())
    assert tables[0] == tables[1] == tables[2]
    text = tables[0].decode()
    assert text.splitlines()[0] == ("selector,profile,T,method,regret,regret_se,lock_in,"
                                    "lai_robbins,realizations")  # fmt: skip
    assert len(text.splitlines()) == 1 + 3 * 2
    assert all(line.endswith(",60") for line in text.splitlines()[1:])


def test_chunking_changes_streams_not_the_statistics_layout(tmp_path):
    """Chunk layout is part of the sweep: another chunk size is another sweep (refused in the
    same folder), and gives a table of the same shape."""
    run_sweep(load_sweep(write(tmp_path, chunk=20)), tmp_path / "o", quiet=True, jobs=1)
    with pytest.raises(ConfigError, match=r"changed: chunk \(20 -> 30\)"):
        run_sweep(load_sweep(write(tmp_path, chunk=30)), tmp_path / "o", quiet=True, jobs=1)


def test_killed_sweep_resumes_to_the_same_table(tmp_path):
    path = write(tmp_path, R=800, chunk=25)  # 3 cells x 32 chunks = 96 tasks
    full = tmp_path / "full"
    run_sweep(load_sweep(path), full, quiet=True, jobs=1)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "eegrad.cli", "sweep", str(path), "--out", str(out), "--jobs",
           "1", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, start_new_session=True)
    tasks = out / "tasks"
    deadline = time.time() + 120
    while time.time() < deadline:
        done = len(list(tasks.glob("*.json"))) if tasks.exists() else 0
        if done >= 5:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(list(tasks.glob("*.json")))
    assert 5 <= finished < 96, finished  # killed mid-way
    for task in tasks.glob("*.json"):  # no half-written task visible: each one parses
        json.loads(task.read_text())
    assert cli(["sweep", str(path), "--out", str(out), "--jobs", "1", "-q"]) == 0
    assert not list(tasks.glob(".*.tmp"))  # a write cut by the kill is cleaned up on resume
    assert (out / "results.csv").read_bytes() == (full / "results.csv").read_bytes()


@pytest.mark.parametrize(
    ("axes", "match"),
    [
        ("selector.gamma = [1.0]", r"Unknown key 'selector.gamma'"),
        ("T = []", r"Axis 'T' .* non-empty list"),
        ('K = ["five"]', r"Key 'K' in .* must be integer"),
        ("seed = [1]", r"Axis 'seed' .* set by the sweep itself"),
    ],
)
def test_bad_axes_are_named(tmp_path, axes, match):
    text = SWEEP.format(R=10, chunk=5).split("[axes]")[0] + "[axes]\n" + axes + "\n"
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_sweep(path)


def test_plot_command(tmp_path):
    path = write(tmp_path)
    out = tmp_path / "o"
    assert cli(["sweep", str(path), "--out", str(out), "--jobs", "1", "-q"]) == 0
    assert cli(["plot", str(out), "--x", "T", "--y", "regret", "--hue", "selector",
                "--logy"]) == 0  # fmt: skip
    assert (out / "plot-regret-vs-T.png").read_bytes()[:4] == b"\x89PNG"
    assert cli(["plot", str(out), "--x", "T", "--y", "nope"]) == 2


def test_table_cells_of_numpy_floats_are_plain_numbers(tmp_path):
    from eegrad.results import read_table, write_table

    write_table(tmp_path / "t.csv", [{"a": np.float64(0.1), "b": np.float32(0.5), "c": np.nan}],
                ("a", "b", "c"))  # fmt: skip
    assert read_table(tmp_path / "t.csv") == [{"a": "0.1", "b": "0.5", "c": ""}]


RAY_RUN = """
import shutil, sys, tempfile
import ray
from eegrad.sweep import load_sweep, run_sweep
short = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
try:
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, _temp_dir=short,
             log_to_driver=False)
    run_sweep(load_sweep(sys.argv[1]), sys.argv[2], executor="ray", quiet=True)
finally:
    ray.shutdown()
    shutil.rmtree(short, ignore_errors=True)
"""


@pytest.mark.slow
def test_ray_executor_gives_the_same_table(tmp_path):
    # Ray comes with the 'flower' extra (Flower's simulation runs on it). It runs in its own
    # Python process: Ray leaves file handles of its subprocesses open after shutdown, which
    # would otherwise surface at the end of the whole test session. Its files go to a short
    # temporary folder (its socket paths must stay under 108 characters), removed afterwards.
    pytest.importorskip("ray")
    path = write(tmp_path)
    run_sweep(load_sweep(path), tmp_path / "local", quiet=True, jobs=1)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0")
    done = subprocess.run([sys.executable, "-c", RAY_RUN, str(path), str(tmp_path / "ray")],
                          check=False, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    local = (tmp_path / "local" / "results.csv").read_bytes()
    assert (tmp_path / "ray" / "results.csv").read_bytes() == local
    assert json.loads((tmp_path / "ray" / "metadata.json").read_text())["executor"] == "ray"


def test_unreachable_dask_scheduler_is_one_line(tmp_path, capsys):
    pytest.importorskip("distributed")
    code = cli(["sweep", str(write(tmp_path)), "--executor", "dask", "--address",
                "tcp://127.0.0.1:9", "--quiet", "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("eegrad: error: --address tcp://127.0.0.1:9: no Dask scheduler")
    assert len(err.splitlines()) == 1
