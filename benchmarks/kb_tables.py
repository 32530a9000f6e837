"""benchmarks/kernelbench.py's problem lists and tables: the level folders' problems in KernelBench's
numbering, a subset by `--only`, and per level the statuses, seconds per problem and fast_p."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path


def problem_number(path: Path) -> int:
    """A KernelBench problem file's number (`19_ReLU.py` -> 19; 0 for a name without one)."""
    found = re.match(r"\d+", path.name)
    return int(found.group()) if found else 0


def problems(folders: list[Path], match: str | None = None) -> dict[str, list[Path]]:
    """Each level folder's problem files, in KernelBench's numbering; with `match`, only the files whose
    name the regular expression finds (case-insensitive: "conv" selects the 98 convolution problems)."""
    keep = re.compile(match, re.IGNORECASE) if match else None
    return {f.name: sorted((p for p in f.glob("*.py") if keep is None or keep.search(p.name)), key=problem_number) for f in folders}


def _chosen(level: str, path: Path, selectors: list[str]) -> bool:
    for sel in selectors:
        where, _, number = sel.rpartition("/")
        if where and where != level:
            continue
        if (number.isdigit() and problem_number(path) == int(number) and path.name.startswith(f"{number}_")) or \
                (not number.isdigit() and number.lower() in path.name.lower()):
            return True
    return False


def subset(folders: list[Path], only: str, match: str | None = None) -> list[Path]:
    """The problem files `--only` names (every one when it is empty) among those `--match` finds (every one
    when None); SystemExit when none is left."""
    selectors = [s.strip() for s in only.split(",") if s.strip()]
    files = [p for level, paths in problems(folders, match).items() for p in paths
             if not selectors or _chosen(level, p, selectors)]
    if not files:
        given = " and ".join(f"--{k} {v}" for k, v in (("only", only), ("match", match)) if v)
        raise SystemExit(f"{given}: no problem file matches in {', '.join(map(str, folders))}")
    return files


def _groups(report, levels: list[str]) -> dict[str, list]:  # noqa: ANN001 - kernelgen.batch.report.BatchReport
    groups = {level: [r for r in report.operators if r.name.startswith(f"kb{level.removeprefix('level')}_")] for level in levels}
    groups = {level: rows for level, rows in groups.items() if rows}  # a level --only left nothing of
    groups["all"] = list(report.operators)
    return groups


def fast_p_table(report, levels: list[str]) -> str:  # noqa: ANN001 - kernelgen.batch.report.BatchReport
    """fast_p per level and over all; a problem that did not fit the GPU's memory is no verdict on its
    kernel: left out, and counted apart."""
    from kernelgen.batch.tables import BASELINES
    from kernelgen.record.fastp import Outcome, fast_p_lines, fast_p_row

    lines = []
    for label, rows in _groups(report, levels).items():
        judged = [r for r in rows if r.status != "memory"]
        table = {b.label: fast_p_row([Outcome(r.status == "finished", r.speedup.get(b.label)) for r in judged]) for b in BASELINES}
        apart = len(rows) - len(judged)
        lines += [f"{label}:" + (f" ({apart} did not fit the GPU's memory: not counted)" if apart else "")]
        lines += ["  " + line for line in fast_p_lines(table, len(judged))]
    return "\n".join(lines)


def time_table(report, levels: list[str]) -> str:  # noqa: ANN001 - kernelgen.batch.report.BatchReport
    """Per level: the statuses, seconds per problem (of the problems that ran a step) and where they
    went (phases, and stages: derive, new, baselines timed beside new, optimize, bench), and the slowest
    problems with their longest phases."""
    lines = []
    for label, rows in _groups(report, levels).items():
        counts = defaultdict(int)
        for r in rows:
            counts[r.status] += 1
        ran = [r for r in rows if r.seconds > 0]
        line = f"{label}: {len(rows)} problem(s): " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        if ran:
            phases: dict[str, float] = defaultdict(float)
            for r in ran:
                for k, v in r.phases.items():
                    phases[k] += v / len(ran)
            top = ", ".join(f"{k} {v:.1f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:5])
            slow = ", ".join(f"{r.name} {r.seconds:.0f} s" for r in sorted(ran, key=lambda r: -r.seconds)[:3])
            stages = ", ".join(f"{k} {sum(r.stages.get(k, 0.0) for r in ran) / len(ran):.1f}"
                               for k in dict.fromkeys(k for r in ran for k in r.stages))
            line += (f"; {sum(r.seconds for r in ran) / len(ran):.1f} s per problem ({len(ran)} ran a step), "
                     f"where: {top}; per stage: {stages or '—'} (baselines beside new); slowest: {slow}")
        lines.append(line)
    return "\n".join(lines)
