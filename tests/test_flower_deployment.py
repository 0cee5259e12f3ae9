"""The Flower apps in ``examples/flower_app`` (NumPy) and ``examples/flower_torch_app`` (a
PyTorch CNN with local epochs, checkpointing every round) against a real deployment on this
machine.

A SuperLink and two SuperNodes run as separate processes (without TLS, on localhost), ``flwr run``
submits the app over Flower's network stack, and every process is stopped by its own id. The
README's "Deployment" section runs the same commands with TLS and node authentication.
"""

import csv
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BIN = Path(sys.executable).parent  # Flower's commands, from the interpreter running the tests
ROUNDS, NODES = 2, 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def _stop(proc: subprocess.Popen) -> None:
    """Stop one process by its id (SIGTERM, then SIGKILL), then what it started (its session)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
    try:  # the ServerApp / ClientApp subprocesses it started, if any are left
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.slow
@pytest.mark.parametrize("app", ["flower_app", "flower_torch_app"])
def test_strategy_runs_on_a_superlink_and_supernodes(tmp_path, app):
    if app == "flower_torch_app":
        pytest.importorskip("torch")
    home = tmp_path / "flwr-home"
    home.mkdir()
    link_port = _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "here"\n\n[superlink.here]\naddress = "127.0.0.1:{link_port}"\n'
        "insecure = true\n"
    )
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    logs = []

    def start(name: str, *args: str) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed in finally
        logs.append(log)
        return subprocess.Popen([str(BIN / args[0]), *args[1:]], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    procs = []
    try:
        link = start("superlink", "flower-superlink", "--insecure", "--port", str(link_port),
                     "--disable-runtime-dependency-installation")  # fmt: skip
        procs.append(link)
        _wait_for_port(link_port, link)
        for i in range(NODES):
            procs.append(start(f"supernode-{i}", "flower-supernode", "--insecure",
                               "--superlink", f"127.0.0.1:{link_port}",
                               "--port", str(_free_port()),
                               "--node-config", f"partition-id={i} num-partitions={NODES}"))  # fmt: skip
        records, checkpoint = tmp_path / "records.csv", tmp_path / "server.npz"
        extra = f' checkpoint="{checkpoint}"' if app == "flower_torch_app" else ""
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(EXAMPLES / app), "here", "--stream", "--run-config",
             f'num-server-rounds={ROUNDS} min-nodes={NODES} csv-path="{records}"{extra}'],
            check=False, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        with open(records) as f:
            rows = list(csv.DictReader(f))
        assert [int(r["server_round"]) for r in rows] == list(range(1, ROUNDS + 1))
        for r in rows:
            assert 1 <= int(r["arm"]) <= NODES
            assert int(r["clients_replied"]) == int(r["clients_asked"]) == int(r["arm"])
            assert 0 < float(r["budget_used"]) <= float(r["budget"])
        assert float(rows[-1]["cost"]) == pytest.approx(ROUNDS * float(rows[0]["budget"]))
        if extra:  # the server checkpointed its last round
            from eegrad.checkpoint import read_checkpoint

            tree, _ = read_checkpoint(checkpoint)
            assert tree["state"]["__dict__"]["server_round"] == ROUNDS
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for log in logs:
            log.close()
    assert all(p.poll() is not None for p in procs)
