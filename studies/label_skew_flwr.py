"""The label-skewed app of ``studies/label_skew_app`` under ``flwr run`` (Flower's simulation
engine, 20 SuperNodes): FedAvg and eegrad's choose_clients, the same seeds, each run's rounds
written where its run config says.

    python studies/label_skew_flwr.py --seeds 5 --out results/label-skew

It sets the local simulation's size once (``flwr federation simulation-config``) in a Flower
home of its own, runs ``flwr run studies/label_skew_app --stream`` for each strategy and seed,
stops the local SuperLink, and prints per strategy the final test loss and accuracy and the
worst round's test loss (each seed's, and their mean).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

APP = Path(__file__).resolve().parent / "label_skew_app"
FLWR = Path(sys.executable).with_name("flwr")


def _stop_local_superlink(home: Path) -> None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = (Path("/proc") / pid / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(home / "local-superlink") in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
            deadline = time.monotonic() + 20
            while (Path("/proc") / pid).exists() and time.monotonic() < deadline:
                time.sleep(0.2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path("results/label-skew"))
    p.add_argument("--strategies", nargs="+", default=["fedavg", "eegrad"])
    args = p.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = out / "flwr-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    subprocess.run([str(FLWR), "federation", "simulation-config", "@none/default", "local",
                    "--num-supernodes", "20"], check=True, env=env, cwd=out,
                   capture_output=True)  # fmt: skip
    try:
        for strategy in args.strategies:
            finals, accs, worsts = [], [], []
            for seed in range(args.seeds):
                rounds = out / f"{strategy}-seed{seed}.csv"
                log = out / f"{strategy}-seed{seed}.log"
                with log.open("w") as fh:
                    subprocess.run([str(FLWR), "run", str(APP), "--stream", "--run-config",
                                    f'strategy="{strategy}" seed={seed} out="{rounds}"'],
                                   check=True, env=env, cwd=out, stdout=fh,
                                   stderr=subprocess.STDOUT, timeout=1800)  # fmt: skip
                with rounds.open(newline="") as fh:
                    rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
                finals.append(rows[-1]["loss"])
                accs.append(rows[-1]["accuracy"])
                worsts.append(max(r["loss"] for r in rows if r["round"] > 0))
                print(f"{strategy} seed {seed}: final loss {finals[-1]:.3f}, accuracy "
                      f"{accs[-1]:.3f}, worst round {worsts[-1]:.3f}", flush=True)
            print(f"{strategy}: final loss {np.mean(finals):.3f}, accuracy {np.mean(accs):.3f}, "
                  f"worst round's loss {np.mean(worsts):.3f} ({args.seeds} runs)", flush=True)
    finally:
        _stop_local_superlink(home)


if __name__ == "__main__":
    main()
