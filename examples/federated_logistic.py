"""
Federated logistic regression
=============================

Federated logistic regression with EE-Grad choosing the number of clients per round.

Run: ``python examples/federated_logistic.py [OUT_DIR]`` (the same as ``eegrad example
federated``); needs ``pip install "eegrad[examples]"``. See ``eegrad.examples.federated``
for the setting.
"""

import sys

from eegrad.examples.federated import main

if __name__ == "__main__":
    summary = main(sys.argv[1] if len(sys.argv) > 1 else "results/federated")
    for method, gap in sorted(summary["final_gap"].items(), key=lambda kv: kv[1]):
        print(f"{method:>10s}  final objective gap {gap:.3e}")
