"""The ``eegrad`` command line."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from ._extras import require_cli
from ._validation import InvalidParameterError


def _studies() -> tuple[Any, ...]:
    """The registered studies (their presets, summaries and order: the help derives from them)."""
    from .studies import all_studies

    return all_studies()


def reproduce_help() -> str:
    """``eegrad reproduce``'s description: each registered study's preset and summary."""
    studies = _studies()
    return (" ".join(f"{kind.preset}: {kind.summary}" for kind in studies)
            + f" all: the {len(studies)}, plus report.md and report.html. " + DEFAULTS_HELP)


def _reproducible() -> tuple[str, ...]:
    """The presets ``eegrad reproduce`` runs: one per registered study."""
    return tuple(kind.preset for kind in _studies())

DEFAULTS_HELP = (
    "The paper does not state alpha, beta, P or c. Defaults: alpha = 2.5, beta = max sigma_n^2 "
    "and P = S(w) of the current iterate (the value 'oracle': the simulator supplies the true "
    "values) and c = 1. Each can be set with the options below; the values used are recorded "
    "in metadata.json."
)


def _number(text: str, kind: type, rule: str, ok: Any) -> Any:
    """``text`` as ``kind`` obeying ``ok``, else argparse's error for the flag: argparse names the
    flag, this names the rule and the value."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}; got {text!r}")
    return value


def _count(text: str) -> int:
    return _number(text, int, "an integer >= 1", lambda v: v >= 1)


def _seed(text: str) -> int:
    return _number(text, int, "an integer >= 0", lambda v: v >= 0)


def _alpha(text: str) -> float:
    return _number(text, float, "a finite number > 2 (eq. pickOracle)",
                   lambda v: math.isfinite(v) and v > 2)  # fmt: skip


def _positive(text: str) -> float:
    return _number(text, float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0)


def _jobs(text: str) -> int:
    return _number(text, int, "an integer >= 1, or -1 for every core", lambda v: v >= 1 or v == -1)


def _float_or_oracle(text: str) -> float | str:
    if text == "oracle":
        return text
    return _number(text, float, "a finite number > 0 or 'oracle'",
                   lambda v: math.isfinite(v) and v > 0)  # fmt: skip


def _add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common options")
    g.add_argument(
        "--realizations",
        "-R",
        type=_count,
        metavar="R",
        help="independent realizations (Monte Carlo sample size)",
    )
    g.add_argument("--seed", type=_seed, metavar="S", help="seed of every random stream")
    g.add_argument("--out", type=Path, metavar="DIR", help="output folder")
    g.add_argument(
        "--engine",
        choices=("auto", "numpy", "numba"),
        help="Monte Carlo engine (default: auto, numba when installed)",
    )
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def _add_selector_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("EE-Grad's constants (eq. pickOracle, eq. funcf)")
    g.add_argument("--alpha", type=_alpha, help="alpha > 2 (default 2.5)")
    g.add_argument("--beta", type=_float_or_oracle, help="beta >= max sigma_n^2, or 'oracle'")
    g.add_argument("--P", dest="P", type=_float_or_oracle, help="P >= S(w), or 'oracle'")
    g.add_argument("--c", type=_positive, help="Hanson-Wright constant c > 0 (default 1)")
    g.add_argument("--rule", action="append", metavar="NAME", type=_registered_rule,
                   help="overlay another selection rule with its defaults (repeatable; "
                   "a registered rule's name, e.g. memory_kl_lcb, or its class's name, e.g. "
                   "MemoryKLLCB; "
                   "study 'sgd', e.g. figure1)")  # fmt: skip


def _overlay_rules() -> list[Any]:
    """The registered rules a ``--rule`` overlay can name: no required parameter, and they run
    in the simulator (not those that learn from the parts of a pull)."""
    from .selectors import all_rules

    return [i for i in all_rules() if not i.required() and i.simulated]


def _registered_rule(value: str) -> str:
    """The registered name of a rule given by its name or its class's name (``--rule``)."""
    for info in _overlay_rules():
        if value in (info.name, info.cls.__name__):
            return info.name
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(i.name for i in _overlay_rules())} or "
        f"{', '.join(i.cls.__name__ for i in _overlay_rules())}; got {value!r}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eegrad",
        description="EE-Grad: exploration and exploitation for cost-efficient mini-batch SGD. "
        "Reproduce the paper's figure and theorems, or run an experiment from a TOML file.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser(
        "reproduce",
        help="reproduce the paper's Figure 1 and theorems",
        description=reproduce_help(),
    )
    rep.add_argument("target", choices=(*_reproducible(), "all"), help="what to reproduce")
    _add_common(rep)
    _add_selector_options(rep)
    run = sub.add_parser(
        "run",
        help="run an experiment described by a TOML file",
        description="Run the experiment a TOML configuration describes (objective, arms, noise, "
        "selector, T, K, eta, realizations, seed; see the presets in eegrad/presets) and write "
        "its CSV, figure and metadata.json into --out (default results/NAME).",
    )
    run.add_argument("config", type=Path, help="the experiment's TOML file")
    _add_common(run)
    _add_selector_options(run)
    bn = sub.add_parser(
        "bench",
        help="the field bench: the default against your FedAvg, fixed n, cohort schedules, "
        "ISP and BARA-style, at your FedAvg's rate",
        description="Tune your FedAvg's client learning rate, run every method of every "
        "setting (development, held-out and fresh held-out groups) at that rate, the same "
        "rounds and the same spend, and each rival again at its own tuned rate; write "
        "DIR/bench.csv, DIR/arms.csv, DIR/retuned.csv, DIR/tuning.json, DIR/report.md and "
        "DIR/bench-runs.csv.gz (the table of its baseline runs). Runs are taken from DIR/runs, "
        "then from the repository's table of baseline runs where what made them is today's, "
        "else run.",
    )
    bn.add_argument("--quick", action="store_true", help="two settings, two seeds, fewer n")
    bn.add_argument("--jobs", type=_count, default=1, metavar="J", help="processes")
    bn.add_argument("--seeds", type=_count, metavar="S", help="seeds (default 10; quick 2)")
    bn.add_argument("--settings", nargs="+", metavar="NAME", help="settings to run")
    bn.add_argument("--settings-file", type=Path, metavar="TOML",
                    help="settings of one's own ([[setting]] tables of BenchSetting's fields), "
                    "run unless --settings names others")
    bn.add_argument("--rule-only", action="store_true",
                    help="run only the default and its ablation; every baseline run must be in "
                    "the table of baseline runs (a rule change's rerun)")
    bn.add_argument("--table", type=Path, metavar="CSV.GZ",
                    help="the table of baseline runs (default docs/bench-runs.csv.gz of the "
                    "repository)")
    bn.add_argument("--out", type=Path, required=True, metavar="DIR")
    bn.add_argument("--quiet", "-q", action="store_true", help="no progress")
    ex = sub.add_parser(
        "example",
        help="run a worked example on real data",
        description="federated: l2-regularised logistic regression on scikit-learn's "
        "breast-cancer data split among 10 clients by label; EE-Grad chooses how many clients "
        "each round pays for, against every fixed number (needs the 'examples' extra). Writes "
        "federated.csv (method,seed,round,cost,objective_gap,test_accuracy) and federated.png. "
        "flower: softmax regression on real digits among 20 non-iid clients with heterogeneous "
        "devices, in Flower (the 'flower' and 'examples' extras): EE-Grad's strategy against "
        "Flower's FedAvg at every fixed client count, at equal total cost. Writes flower.csv "
        "(method,seed,step,cost,objective_gap,test_accuracy,split), flower.png, metadata.json. "
        "flower-torch: a PyTorch CNN on MNIST-5k among 20 non-iid clients with E local epochs, "
        "EE-Grad's strategy against FedAvg at every fixed n at equal cost (the 'flower', "
        "'torch' and 'examples' extras). Writes flower_torch.csv (method,seed,epochs,step,cost,"
        "train_loss,test_accuracy) and metadata.json. "
        "flower-dp: central differential privacy among 200 clients (8x8 digits): EE-Grad's "
        "strategy with CentralDP('auto') against DP-FedAvg (Flower's own fixed-clipping wrapper) "
        "at every fixed n, at equal epsilon (the 'flower' and 'examples' extras). Writes "
        "flower_dp.csv (method,seed,step,cost,objective_gap,clients,noise_std,epsilon) and "
        "metadata.json. "
        "flower-scorecard: the default strategy against Flower's FedAvg at every fixed n, at "
        "equal total cost, in eight federations (FedSGD, local steps, heavy overheads, PyTorch "
        "CNN with 1 and 3 epochs, a mini-batch MLP with momentum, central DP, a drifting best "
        "n; the 'flower', 'torch' and 'examples' extras). Writes scorecard.csv (setting,method,"
        "seed,round,cost,train_loss,test_accuracy), arms.csv, scorecard.md, scorecard.png and "
        "metadata.json; an interrupted card rerun with the same command runs only what is "
        "missing. "
        "wall-clock: the samples n clients buy with their shares of a round's time budget "
        "(eegrad.flower.WallClock), one after another and all at once (the 'flower' and "
        "'examples' extras). Writes wall_clock.csv (n,mode,rep,client,share,samples,seconds).",
    )
    ex.add_argument("name", choices=("federated", "flower", "flower-torch", "flower-dp",
                                     "flower-scorecard", "wall-clock"),
                    help="the example")  # fmt: skip
    ex.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="output folder (default results/NAME)")  # fmt: skip
    ex.add_argument("--seeds", type=_count, default=None,
                    help="independent runs per method (federated: 10; flower: 10, --quick 2; "
                         "wall-clock: rounds per n, 10)")  # fmt: skip
    ex.add_argument("--steps", type=_count, default=150, help="federated: SGD steps K")
    ex.add_argument("--rounds", type=_count, default=None,
                    help="federated: rounds T per step (>= 2N, default 40); flower: server "
                         "rounds per run (default 150, --quick 40)")  # fmt: skip
    ex.add_argument("--quick", action="store_true",
                    help="flower: 8x8 digits, one split, 2 seeds, 5 fixed n (under a minute); "
                         "flower-scorecard: 2 seeds, short runs, about 5 fixed n (minutes)")
    ex.add_argument("--settings", nargs="+", default=None, metavar="NAME",
                    help="flower-scorecard: the settings to run (default all)")
    ex.add_argument("--warmup-reference", action="store_true",
                    help="flower-scorecard: also run, in each setting, the default's warm-up "
                         "arms then the best fixed n (what the warm-up alone costs)")  # fmt: skip
    ex.add_argument("--runtime", choices=("local", "simulation"), default="local",
                    help="flower: messages delivered in this process, or Flower's simulation "
                         "runtime (Ray)")  # fmt: skip
    ex.add_argument("--discounts", type=float, nargs="*", default=None, metavar="LAMBDA",
                    help="flower: also run the default rule with these discounts")  # fmt: skip
    ex.add_argument("--splits", nargs="+", default=None, metavar="SPLIT",
                    help="flower: non-iid splits, 'dirichlet-<alpha>' or 'shards' (default both; "
                         "--quick: dirichlet-0.3)")  # fmt: skip
    ex.add_argument("--jobs", type=_jobs, default=1,
                    help="flower, local runtime: federations run in this many processes (-1: "
                         "every core); the rows do not depend on it")  # fmt: skip
    sw = sub.add_parser(
        "sweep",
        help="run a grid of experiments (locally, on Dask or on Ray), resumable",
        description="Run a sweep file: a base experiment, axes (any config key, each a list), "
        "realizations per cell and a chunk size. Each (cell, chunk) is a task run through "
        "joblib; finished tasks are saved as they complete, so rerunning the same command "
        "resumes. Writes results.csv (tidy, one row per cell and statistic), metadata.json "
        "and manifest.json into --out (default results/NAME).",
    )
    sw.add_argument("sweep", type=Path, help="the sweep's TOML file")
    sw.add_argument(
        "--executor",
        choices=("local", "dask", "ray"),
        default="local",
        help="local: joblib's loky processes (default); dask: a Dask cluster "
        "(--address, or a LocalCluster started here); ray: Ray tasks (--address, a running "
        "ray.init(), or a local Ray started here)",
    )
    sw.add_argument(
        "--jobs",
        type=_count,
        metavar="N",
        help="processes (local: default all cores; dask LocalCluster: workers)",
    )
    sw.add_argument("--address", metavar="ADDRESS",
                    help="a running Dask scheduler (tcp://HOST:PORT) or Ray cluster "
                         "(ray://HOST:PORT)")  # fmt: skip
    sw.add_argument("--out", type=Path, metavar="DIR")
    sw.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    rp = sub.add_parser(
        "report",
        help="rebuild the report (or a study's figure) from results alone",
        description="Rewrite report.md and report.html in ROOT from the study folders under it "
        "(as 'eegrad reproduce all' writes them), reading only their metadata.json and tables; "
        "with --figure, redraw the figure of the one study folder ROOT.",
    )
    rp.add_argument("root", type=Path, metavar="ROOT")
    rp.add_argument("--figure", action="store_true", help="redraw ROOT's figure instead")
    pl = sub.add_parser(
        "plot",
        help="plot a federated run's records, or a metric of a sweep's results",
        description="Without --x and --y: RESULTS is a federated run's records (the csv_path "
        "of EEGradStrategy or choose_clients): plot n over the rounds and the evaluations "
        "(<stem>-evaluation.csv beside it) against the cost spent. With --x and --y: plot "
        "column --y of RESULTS (a results.csv or its folder) against --x, one line per value "
        "of --hue, with ±2 SE bars where a standard-error column exists.",
    )
    pl.add_argument("results", type=Path)
    pl.add_argument("--x")
    pl.add_argument("--y")
    pl.add_argument("--hue")
    pl.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COL=VALUE",
        help="keep rows where COL equals VALUE (repeatable)",
    )
    pl.add_argument("--logx", action="store_true")
    pl.add_argument("--logy", action="store_true")
    pl.add_argument("--out", type=Path, help="image file (default: next to the results)")
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("realizations", "seed", "engine"):
        if getattr(args, key, None) is not None:
            out[key] = getattr(args, key)
    for key in ("alpha", "beta", "P", "c"):
        if getattr(args, key, None) is not None:
            out[f"selector.{key}"] = getattr(args, key)
    if getattr(args, "rule", None):
        out["rules"] = [{"rule": r} for r in args.rule]
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = "eegrad " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        require_cli()
        return _dispatch(args, command)
    except (InvalidParameterError, ModuleNotFoundError) as exc:
        print(f"eegrad: error: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace, command: str) -> int:
    from .pipeline import run_to_folder
    from .studies import load_config, load_preset

    if args.command == "sweep":
        from .sweep import load_sweep, run_sweep

        sweep = load_sweep(args.sweep)
        out = args.out or Path("results") / sweep.name
        run_sweep(sweep, out, executor=args.executor, jobs=args.jobs, address=args.address,
                  quiet=args.quiet)  # fmt: skip
        print(f"wrote {out}/results.csv")
        return 0
    if args.command == "report":
        if args.figure:
            from .plots import replot

            print(f"wrote {', '.join(map(str, replot(args.root)))}")
            return 0
        from .report import report_from_results

        sections = report_from_results(args.root, command)
        print(f"wrote {args.root}/report.md and report.html ({len(sections)} sections)")
        return 0
    if args.command == "plot" and args.x is None and args.y is None:
        from .plots import plot_run

        print(f"wrote {plot_run(args.results, out=args.out)}")
        return 0
    if args.command == "plot":
        if args.x is None or args.y is None:
            raise InvalidParameterError(
                f"--x and --y are given together (a sweep's results) or not at all (a run's "
                f"records); got --x {args.x!r} and --y {args.y!r}.")
        from .plots import plot_results

        path = plot_results(args.results, x=args.x, y=args.y, hue=args.hue, where=args.where,
                            logx=args.logx, logy=args.logy, out=args.out)  # fmt: skip
        print(f"wrote {path}")
        return 0
    if args.command == "bench":
        from .bench import main as bench

        names = args.settings
        if args.settings_file is not None:
            from .bench.settings import read_settings_file

            own = read_settings_file(args.settings_file)
            names = names or own
        report = bench(args.out, quick=args.quick, jobs=args.jobs, seeds=args.seeds,
                       settings=names, command=command, quiet=args.quiet,
                       rule_only=args.rule_only, table=args.table)  # fmt: skip
        print(f"wrote {report}")
        return 0
    if args.command == "example" and args.name == "wall-clock":
        from .examples.wall_clock import main as wall_clock

        out = args.out or Path("results/wall-clock")
        wall_clock(out, reps=args.seeds or 10)
        print(f"wrote {out}/")
        return 0
    if args.command == "example" and args.name == "flower-scorecard":
        from .examples.scorecard import main as scorecard

        out = args.out or Path("results/flower_scorecard")
        scorecard(out, quick=args.quick, seeds=args.seeds, settings=args.settings,
                  jobs=args.jobs, progress=not getattr(args, "quiet", False), command=command,
                  warmup_reference=args.warmup_reference)  # fmt: skip
        print(f"wrote {out}/")
        return 0
    seeded = {"flower-torch": ("flower_torch", 80), "flower-dp": ("flower_dp", 100)}
    if args.command == "example" and args.name in seeded:  # (module, default rounds)
        import importlib

        module, rounds = seeded[args.name]
        study = importlib.import_module(f"{__package__}.examples.{module}")
        out = args.out or Path(f"results/{module}")
        study.main(out, seeds=args.seeds or 10, rounds=args.rounds or rounds, jobs=args.jobs,
                   progress=not getattr(args, "quiet", False))  # fmt: skip
        print(f"wrote {out}/")
        return 0
    if args.command == "example" and args.name == "flower":
        from .examples.flower import main as flower

        out = args.out or Path("results/flower")
        flower(out, quick=args.quick, seeds=args.seeds, rounds=args.rounds, runtime=args.runtime,
               discounts=args.discounts, splits=tuple(args.splits) if args.splits else None,
               jobs=args.jobs, progress=not getattr(args, "quiet", False))  # fmt: skip
        print(f"wrote {out}/")
        return 0
    if args.command == "example":
        from .examples.federated import main as federated

        args.out = args.out or Path("results/federated")
        summary = federated(args.out, seeds=args.seeds or 10, K=args.steps, T=args.rounds or 40)
        print(f"objective gap, mean of the last {summary['steps_averaged']} steps, "
              f"± SE over {args.seeds} seeds:")  # fmt: skip
        for m, v in summary["final_gap"].items():
            print(f"  {m:10s} {v:.3g} ± {summary['final_gap_se'][m]:.2g}")
        print(f"wrote {args.out}/ (best fixed n in hindsight: {summary['best_fixed']})")
        return 0
    overrides = _overrides(args)
    if args.command == "run":
        cfg = load_config(args.config, overrides)
        out = args.out or Path("results") / cfg.name
        run_to_folder(cfg, out, quiet=args.quiet, command=command)
        print(f"wrote {out}/")
        return 0
    targets = _reproducible() if args.target == "all" else (args.target,)
    # Validate every configuration before running anything: a bad option writes nothing.
    from .studies import study_kind

    # Each study takes the options that apply to it (StudyKind.options).
    configs = {t: load_preset(t, study_kind(t).options(overrides)) for t in targets}
    if args.target == "all":
        root = args.out or Path("results")
        studies = {}
        for t, cfg in configs.items():
            study = run_to_folder(cfg, root / t, quiet=args.quiet, command=command)
            studies[t] = (study, f"{t}/{t}.png")
        from .report import claims, write_report

        write_report(root, claims(studies), command)
        print(f"wrote {root}/ (report.md, report.html)")
        return 0
    (t,) = targets
    out = args.out or Path("results") / t
    run_to_folder(configs[t], out, quiet=args.quiet, command=command)
    print(f"wrote {out}/")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
