"""``benchmarks/conformance.py`` runs through its real entry point, with the tiniest sizes.

The script needs the optional ``compaction-conformance-kit`` package; without it
these tests are skipped. As in ``test_bench_smoke.py``, the checks are on the
table header and the JSON keys, never on the values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "compaction_kit",
    reason="compaction_kit is not importable: pip install compaction-conformance-kit==0.8.0",
    exc_type=ImportError,  # a broken install skips too, not only an absent one
)

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "conformance.py"
SMALLEST = ("--budgets", "20%", "--rounds", "2", "--seeds", "1")


def run(*args: str) -> str:
    """Run the script to the end with this interpreter; fail on a traceback or a non-zero status."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=SCRIPT.parent.parent,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    return proc.stdout


def test_bench_conformance_table() -> None:
    out = run(*SMALLEST)
    assert out.startswith("compaction-conformance-kit ")
    assert "## Budget 20%, round 2" in out and "Round 1, budget 20%:" in out
    header = next(line for line in out.splitlines() if line.startswith("| rank | compactor |"))
    for column in ("compliant", "safety_rule", "user_preference", "overall", "round-1 overall"):
        assert f"| {column} |" in header
    assert "| hermes-deterministic |" in out and "| semantic-checklist |" in out
    assert "hermes-deterministic rounds over the budget:" in out


def test_bench_conformance_json() -> None:
    data = json.loads(run(*SMALLEST, "--json"))
    for key in ("kit_version", "budgets", "seeds", "rounds", "seconds", "final", "round1"):
        assert key in data
    assert "hermes_overruns" in data
    names = {e["compactor"] for e in data["final"]["entries"]}
    assert {"hermes-deterministic", "semantic-checklist", "naive-summary"} <= names
    assert {"lossy-truncation"} <= {e["compactor"] for e in data["round1"]["entries"]}
    entry = data["final"]["entries"][0]
    for key in ("budget_compliant", "max_output_to_budget", "randomized", "semantic"):
        assert key in entry
    assert "final_median_by_type" in entry["randomized"]


def test_bench_conformance_bad_budget() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--budgets", "150%"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "budget out of range" in proc.stderr
