"""The Flower apps in ``examples/flower_app`` (NumPy) and ``examples/flower_torch_app`` (a
PyTorch CNN with local epochs, checkpointing every round) against a real deployment on this
machine.

A SuperLink and two SuperNodes run as separate processes (without TLS, on localhost), ``flwr run``
submits the app over Flower's network stack, and every process is stopped by its own id. The
README's "Deployment" section runs the same commands with TLS and node authentication.
"""

import contextlib
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

#: Every test here starts Flower's own processes: CI runs them as a step of their own
#: (.ci/run), after the README's test command, which leaves them out.
pytestmark = pytest.mark.deployment

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


class _Deployment:
    """A SuperLink and SuperNodes on localhost, each process in its own session, all stopped by
    :meth:`close`."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        home = tmp_path / "flwr-home"
        home.mkdir()
        self.link_port = _free_port()
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "here"\n\n[superlink.here]\naddress = '
            f'"127.0.0.1:{self.link_port}"\ninsecure = true\n'
        )
        self.env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
                    "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
        self.logs, self.procs = [], []

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed in close()
        self.logs.append(log)
        proc = subprocess.Popen([str(BIN / args[0]), *args[1:]], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        return proc

    def superlink(self) -> subprocess.Popen:
        """The SuperLink, started and listening."""
        link = self.start("superlink", "flower-superlink", "--insecure", "--port",
                          str(self.link_port), "--disable-runtime-dependency-installation")  # fmt: skip
        _wait_for_port(self.link_port, link)
        return link

    def supernode(self, i: int, nodes: int) -> subprocess.Popen:
        """SuperNode i of ``nodes`` (its partition), connecting to the SuperLink."""
        return self.start(f"supernode-{i}", "flower-supernode", "--insecure",
                          "--superlink", f"127.0.0.1:{self.link_port}",
                          "--port", str(_free_port()),
                          "--node-config", f"partition-id={i} num-partitions={nodes}")  # fmt: skip

    def superlink_and_supernodes(self, nodes: int) -> list[subprocess.Popen]:
        self.superlink()
        return [self.supernode(i, nodes) for i in range(nodes)]

    def flwr_run(self, run_config: str) -> subprocess.Popen:
        """``flwr run`` of the shipped NumPy app on this deployment, its log streamed to a pipe."""
        run = subprocess.Popen(
            [str(BIN / "flwr"), "run", str(EXAMPLES / "flower_app"), "here", "--stream",
             "--run-config", run_config],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.procs.append(run)
        return run

    def close(self) -> None:
        for proc in reversed(self.procs):
            _stop(proc)
        for log in self.logs:
            log.close()
        assert all(p.poll() is not None for p in self.procs)


def _wait_for_a_record(records: Path, run: subprocess.Popen, timeout: float = 180.0) -> None:
    """Until the run has recorded its first round (or ended, or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while not _rows(records) and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.2)


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_supernode_killed_mid_run_does_not_stall_it(tmp_path):
    """Three SuperNodes, min-nodes = 3; one is killed (SIGKILL, with its ClientApp processes)
    after round 1. The run finishes: later rounds ask among the two left (their records say
    so), and the dead node, where a round asked it, is named by its own id — never as the
    SuperLink's node id (1) that answers for it."""
    nodes, rounds = 3, 4
    dep = _Deployment(tmp_path)
    try:
        supernodes = dep.superlink_and_supernodes(nodes)
        records = tmp_path / "records.csv"
        run = dep.flwr_run(f'num-server-rounds={rounds} min-nodes={nodes} csv-path="{records}"')
        _wait_for_a_record(records, run)
        assert _rows(records), "round 1 was never recorded"
        os.killpg(supernodes[-1].pid, signal.SIGKILL)  # the node and its ClientApp processes
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out[-3000:]
        rows = _rows(records)
        assert [int(r["server_round"]) for r in rows] == list(range(1, rounds + 1))
        assert int(rows[-1]["nodes_connected"]) == nodes - 1
        failed = [r["failed_nodes"].split() for r in rows]
        named = {nid for row in failed for nid in row}
        assert "1" not in named  # the SuperLink's id never stands for the dead node
        assert len(named) <= 1  # one node died: at most one id is ever named
        assert all(len(row) == len(set(row)) for row in failed)  # once in a round
        for r in rows:
            assert int(r["clients_replied"]) == int(r["clients_asked"]) - len(
                r["failed_nodes"].split())
    finally:
        dep.close()


@pytest.mark.slow
def test_one_node_at_the_first_round_then_late_joiners(tmp_path):
    """One SuperNode when the run starts (min-nodes = 1): the default rule waits for a second
    (it learns from a spread; it crashed with one), and a third that connects later is among
    the nodes each later round samples from. The run finishes its rounds."""
    nodes, rounds = 3, 6
    dep = _Deployment(tmp_path)
    try:
        dep.superlink()
        dep.supernode(0, nodes)
        records = tmp_path / "records.csv"
        run = dep.flwr_run(f'num-server-rounds={rounds} min-nodes=1 csv-path="{records}"')
        time.sleep(8.0)  # the run is up and waits: one node connected
        assert not _rows(records), "a round ran with one node"
        dep.supernode(1, nodes)
        _wait_for_a_record(records, run)
        dep.supernode(2, nodes)
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out[-3000:]
        assert "Waiting for nodes: 1 of 2 connected" in out
        rows = _rows(records)
        assert [int(r["server_round"]) for r in rows] == list(range(1, rounds + 1))
        assert int(rows[0]["nodes_connected"]) >= 2
        assert int(rows[-1]["nodes_connected"]) == nodes  # the late joiner is connected
        for r in rows:
            assert 1 <= int(r["arm"]) <= int(r["nodes_connected"])
    finally:
        dep.close()


@pytest.mark.slow
@pytest.mark.parametrize("app", ["flower_app", "flower_torch_app"])
def test_strategy_runs_on_a_superlink_and_supernodes(tmp_path, app):
    if app != "flower_app":
        pytest.importorskip("torch")
        pytest.importorskip("sklearn")
    dep = _Deployment(tmp_path)
    try:
        dep.superlink_and_supernodes(NODES)
        records, checkpoint = tmp_path / "records.csv", tmp_path / "server.npz"
        extra = f' checkpoint="{checkpoint}"' if app == "flower_torch_app" else ""
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(EXAMPLES / app), "here", "--stream", "--run-config",
             f'num-server-rounds={ROUNDS} min-nodes={NODES} csv-path="{records}"{extra}'],
            check=False, env=dep.env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        rows = _rows(records)
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
        dep.close()


def _stop_local_superlink(home: Path) -> None:
    """Stop the local SuperLink that ``flwr`` started for the Flower home ``home`` (it keeps
    running after ``flwr run`` returns), by its own id: the process whose database is in it."""
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
            deadline = time.monotonic() + 20  # the next local SuperLink takes the same ports
            while (Path("/proc") / pid).exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("app", ["flower_app", "flower_torch_app", "flower_quickstart_app"])
def test_flwr_run_of_a_shipped_app_in_the_local_simulation(tmp_path, app):
    """What a user types on a fresh machine after the README's install line: the simulation's
    size set once, then ``flwr run``, in a new Flower home (Flower starts its local SuperLink).
    The app installs no dependency of its own (eegrad is on no package index), runs with ten
    simulated SuperNodes and records every round."""
    if app != "flower_app":
        pytest.importorskip("torch")
        pytest.importorskip("sklearn")
    home = tmp_path / "flwr-home"
    home.mkdir()
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    records = tmp_path / "records.csv"
    caller = tmp_path / "caller"  # the directory flwr is run from: nothing is written there
    caller.mkdir()
    try:
        size = subprocess.run([str(BIN / "flwr"), "federation", "simulation-config",
                               "@none/default", "local", "--num-supernodes", "10"],
                              check=False, env=env, capture_output=True, text=True, timeout=180,
                              cwd=caller)  # fmt: skip
        assert size.returncode == 0, size.stdout[-2000:] + size.stderr[-2000:]
        model = tmp_path / "models" / "final.pt"  # the quickstart's model, where its config says
        model.parent.mkdir()
        config = f'num-server-rounds=3 csv-path="{records}"'
        if app == "flower_quickstart_app":
            config += f' model-path="{model}"'
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(EXAMPLES / app), "--stream", "--run-config", config],
            check=False, env=env, capture_output=True, text=True, timeout=420, cwd=caller,
        )  # fmt: skip
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-3000:]
        assert "Exit Code" not in out, out[-3000:]  # Flower reports a failed run, exits 0
        rows = _rows(records)
        if app == "flower_quickstart_app":  # Flower's quickstart with choose_clients and no
            # budget: what its FedAvg(fraction_train=0.5) spends in 3 rounds of 10 nodes, 15
            # trainings, said in the log, spent in the 3 rounds
            assert "budget: 15 client trainings, what FedAvg(fraction_train=0.5" in out, \
                out[-3000:]  # fmt: skip
            assert [int(r["server_round"]) for r in rows] == [1, 2, 3], out[-3000:]
            assert float(rows[-1]["cost"]) == pytest.approx(15.0), out[-3000:]
            assert model.exists(), out[-3000:]  # saved where its config says
            assert list(caller.iterdir()) == [], out[-3000:]
            return
        assert [int(r["server_round"]) for r in rows] == [1, 2, 3], out[-3000:]
        assert all(int(r["nodes_connected"]) == 10 for r in rows)
        assert all(1 <= int(r["arm"]) <= 10 for r in rows)
    finally:
        _stop_local_superlink(home)
