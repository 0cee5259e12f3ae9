"""The quickstart app under ``flwr run`` beside the same app with Flower's FedAvg alone.

Runs ``examples/flower_quickstart_app`` (``choose_clients`` with no budget: the run spends what
its ``FedAvg(fraction_train=0.5)`` would in ``num-server-rounds``) and a copy of it whose
server holds the ``FedAvg`` itself, each in Flower's local simulation (its own Flower home, K
SuperNodes), and reads each run's saved final model on every partition's test share (the
digits the clients hold out, pooled). It prints, per repetition and variant, the rounds run,
the client trainings spent and the final model's test loss and accuracy, then the means.

Flower's simulation samples the clients without a seed the app can set, so repetitions differ:
compare the means over ``--reps``.

Usage::

    python studies/quickstart_vs_fedavg.py --rounds 10 --supernodes 10 --reps 3
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "examples" / "flower_quickstart_app"
BIN = Path(sys.executable).parent
#: the server line the FedAvg copy replaces, and what replaces it
CHOOSE = "strategy = choose_clients(FedAvg("
PLAIN = "strategy = (FedAvg("


def _stop_local_superlink(home: Path) -> None:
    """Stop the local SuperLink ``flwr`` started for the Flower home ``home`` (the deployment
    tests' helper)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "test_flower_deployment.py"
    spec = importlib.util.spec_from_file_location("_deployment_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._stop_local_superlink(home)


def _fedavg_copy(where: Path) -> Path:
    """The app with its server holding Flower's FedAvg alone (choose_clients' call removed)."""
    app = where / "fedavg_app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    server = app / "quickstart" / "server_app.py"
    text = server.read_text()
    if CHOOSE not in text:
        raise RuntimeError(f"{server} no longer holds {CHOOSE!r}; update this benchmark")
    start = text.index(CHOOSE)
    end = text.index("\n\n", start)
    call = ("strategy = FedAvg(fraction_train=fraction_train,\n"
            "                      fraction_evaluate=fraction_evaluate)")
    server.write_text(text[:start] + call + text[end:])
    return app


def _test_on_pooled_shares(model_path: Path, supernodes: int) -> tuple[float, float]:
    """The saved model's mean cross-entropy and accuracy on every partition's test share."""
    import torch

    sys.path.insert(0, str(APP))
    from quickstart.task import Net, load_data

    net = Net()
    net.load_state_dict(torch.load(model_path))
    net.eval()
    loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for pid in range(supernodes):
            _, testloader = load_data(pid, supernodes)
            for images, labels in testloader:
                out = net(images)
                loss += float(torch.nn.functional.cross_entropy(out, labels, reduction="sum"))
                correct += int((out.argmax(1) == labels).sum())
                count += len(labels)
    return loss / count, correct / count


def run_once(app: Path, rounds: int, supernodes: int, where: Path) -> dict[str, float]:
    """One ``flwr run`` of ``app`` in a fresh Flower home under ``where``."""
    home = where / "flwr-home"
    home.mkdir()
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "RAY_USAGE_STATS_ENABLED": "0"}
    records = where / "records.csv"
    try:
        subprocess.run([str(BIN / "flwr"), "federation", "simulation-config", "@none/default",
                        "local", "--num-supernodes", str(supernodes)], check=True, env=env,
                       capture_output=True, text=True, timeout=180, cwd=where)
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(app), "--stream", "--run-config",
             (f'num-server-rounds={rounds} csv-path="{records}" '
              f'model-path="{where / "final_model.pt"}"')],
            check=False, env=env, capture_output=True, text=True, timeout=1800, cwd=where)
        out = run.stdout + run.stderr
        if run.returncode != 0 or "Exit Code" in out or not (where / "final_model.pt").exists():
            raise RuntimeError(f"flwr run of {app} failed:\n{out[-3000:]}")
    finally:
        _stop_local_superlink(home)
    loss, accuracy = _test_on_pooled_shares(where / "final_model.pt", supernodes)
    if records.exists():  # eegrad's records: the rounds run and the trainings spent
        with records.open() as f:
            rows = list(csv.DictReader(f))
        done, spent = len(rows), float(rows[-1]["cost"])
    else:  # FedAvg: every round, max(floor(K * 0.5), 2) trainings
        done, spent = rounds, rounds * max(int(supernodes * 0.5), 2)
    return {"rounds": done, "trainings": spent, "loss": loss, "accuracy": accuracy}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--supernodes", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {"eegrad": [], "fedavg": []}
    print("| variant | rep | rounds | trainings | test loss | test accuracy |")
    print("|---|---|---|---|---|---|")
    for rep in range(args.reps):
        for variant in ("eegrad", "fedavg"):
            with tempfile.TemporaryDirectory() as tmp:
                where = Path(tmp)
                app = APP if variant == "eegrad" else _fedavg_copy(where)
                r = run_once(app, args.rounds, args.supernodes, where)
            results[variant].append(r)
            print(f"| {variant} | {rep} | {r['rounds']} | {r['trainings']:g} | "
                  f"{r['loss']:.4f} | {r['accuracy']:.4f} |", flush=True)
    for variant, rows in results.items():
        mean = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}
        print(f"| {variant} | mean | {mean['rounds']:g} | {mean['trainings']:g} | "
              f"{mean['loss']:.4f} | {mean['accuracy']:.4f} |")


if __name__ == "__main__":
    main()
