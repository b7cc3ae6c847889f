"""``python -m harness.report --compare A B``: a baseline sweep against a candidate, job by job
(as pytest-benchmark's compare): both medians with their CIs, the speed-up with its CI, and
whether it is beyond the noise. With ``--fail-on-slowdown 5%`` it gates a CI job: the exit code is 1
when a job of the candidate is slower than the baseline beyond the noise by more than that."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import ConfigError
from ..stats import judge_speedup
from .runs import Run
from .subjects import find_subject
from .tables import Table, varying_keys

COLS = ["baseline ms", "candidate ms", "speed-up", "verdict"]


def _key(run: Run, keys: list[str]) -> str:
    """What identifies a job across the two sweeps: the values of the keys either sweep varies
    (what is fixed per sweep, such as the option being compared, is left out so jobs pair up)."""
    return " ".join(f"{k.rsplit('.', 1)[-1]}={run.value(k)}" if k != "model" else run.value(k) for k in keys) \
        or run.label


def _keys(base: list[Run], cand: list[Run]) -> list[str]:
    return list(dict.fromkeys(["model", *varying_keys(base), *varying_keys(cand)]))


@dataclass
class Comparison:
    """The table, and per job the candidate's slowdown (candidate / baseline - 1) where it is slower beyond
    the CIs of both."""

    table: Table
    slower: dict[str, float] = field(default_factory=dict)

    def regressions(self, threshold: float) -> dict[str, float]:
        """The jobs slower beyond the noise by more than ``threshold`` (0.05: 5%)."""
        return {job: s for job, s in self.slower.items() if s > threshold}


def parse_threshold(text: str) -> float:
    """``5%`` or ``5`` -> 0.05; a negative or unreadable threshold is a ConfigError."""
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        raise ConfigError(f"--fail-on-slowdown {text!r}: give a percentage such as 5%") from None
    if value < 0:
        raise ConfigError(f"--fail-on-slowdown {text!r}: the threshold must be >= 0%")
    return value


def compare(results_dir: str | Path, baseline: str, candidate: str) -> Comparison:
    """The table of the jobs two sweeps (ids or study names) share, or of two single runs (record or MLflow run
    ids, ``latest``: :func:`~harness.report.subjects.find_subject`); a job in only one sweep is listed with
    ``missing`` on the other side."""
    a, b = find_subject(results_dir, baseline), find_subject(results_dir, candidate)
    if a.name == b.name:
        raise ConfigError(f"--compare needs two different sweeps or runs: both name {a.name}")
    base, cand = a.runs, b.runs
    pairs: dict[str, list[Run | None]] = {}
    if len(base) == len(cand) == 1 and not a.sweep_id and not b.sweep_id:  # two single runs: one row, whatever ran
        pairs[_single_row(base[0], cand[0])] = [base[0], cand[0]]
    else:
        keys = _keys(base, cand)
        for i, runs in enumerate((base, cand)):
            for run in runs:
                pairs.setdefault(_key(run, keys), [None, None])[i] = run
    t = Table(f"{b.name} (candidate) against {a.name} (baseline): median latency", "job",
              list(pairs), COLS, geomean=False, ratio_cols=("speed-up",))
    out = Comparison(t)
    for row, (ra, rb) in pairs.items():
        ratio = _fill(t, row, ra, rb)
        if ratio is not None and ratio < 1:
            out.slower[row] = 1 / ratio - 1
    return out


def _single_row(a: Run, b: Run) -> str:
    """The row's name for two single runs: the job where they ran the same, else both."""
    name_a, name_b = a.record.get("run_name") or a.label, b.record.get("run_name") or b.label
    return name_a if name_a == name_b else f"{name_a} -> {name_b}"


def _cell(t: Table, row: str, col: str, run: Run | None) -> float | None:
    value = run.metric("latency_median_ms") if run else None
    t.cells[(row, col)] = value if value is not None else (run.reason if run else "missing")
    if value is not None and run is not None:
        t.mark((row, col), run)
    return value


def _fill(t: Table, row: str, ra: Run | None, rb: Run | None) -> float | None:
    """The row's cells; the speed-up where it is beyond the noise, else None."""
    va, vb = _cell(t, row, "baseline ms", ra), _cell(t, row, "candidate ms", rb)
    if va is None or vb is None or vb <= 0:
        t.cells[(row, "speed-up")] = t.cells[(row, "verdict")] = "-"
        return None
    ratio = va / vb  # > 1: the candidate is faster
    a, b = (row, "baseline ms"), (row, "candidate ms")
    judged = judge_speedup(ratio, t.ci.get(a), t.ci.get(b), t.flags.get(a), t.flags.get(b))
    if judged.smoke:  # a handful of samples: no comparison, and no slowdown to fail on
        t.cells[(row, "speed-up")], t.cells[(row, "verdict")] = "-", "smoke test: not compared"
        return None
    t.cells[(row, "speed-up")] = ratio
    if judged.ci is not None:
        t.ci[(row, "speed-up")] = judged.ci
    if not judged.beyond:
        verdict = "same (within the CI)"
    else:
        verdict = f"{'faster' if ratio > 1 else 'slower'} ({100 * abs(ratio - 1):.1f}%)"
    t.cells[(row, "verdict")] = verdict + (", noisy" if judged.noisy else "")
    return ratio if judged.beyond else None
