"""The command line. It parses, calls library functions, and is the one place that turns domain
errors into messages and exit codes (2: your input; 1: the work ran and failed; 130: interrupted).
Option types live in kernelgen.cli_options, the terminal's side (consoles, the error boundary,
progress, tables) in kernelgen.console."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markdown import Markdown
from rich.markup import escape

from kernelgen.cli_memory import memory_app
from kernelgen.cli_options import (BaseUrl, Backend, Candidates, Device, LLMTimeout, MaxRetries, MaxTokens, Model, NoService,
                                   Precision, Repairs, Replay, ReplayMismatch, Temperature, _Command, llm_options)
from kernelgen.console import err, errors_to_exit, llm_warnings, out, print_run, progress
from kernelgen.errors import KernelGenError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="KernelGen: from an operator spec (YAML) to a verified, benchmarked, optimized Triton kernel.")
app.add_typer(memory_app, name="memory")


@app.command(cls=_Command)
def new(
    spec: Annotated[Path, typer.Argument(help="operator spec (YAML), or a KernelBench-format problem (.py)", metavar="SPEC")],
    out_dir: Annotated[Path, typer.Option("--out", help="parent folder of the operator folder")] = Path("generated"),
    backend: Backend = "auto",
    device: Device = "auto",
    force: Annotated[bool, typer.Option("--force", help="regenerate; the old folder is moved aside, not deleted")] = False,
    model: Model = None,
    base_url: BaseUrl = None,
    replay: Replay = None,
    temperature: Temperature = None,
    max_tokens: MaxTokens = None,
    repairs: Repairs = None,
    llm_timeout: LLMTimeout = None,
    max_retries: MaxRetries = None,
    replay_mismatch: ReplayMismatch = None,
    no_bench: Annotated[bool, typer.Option("--no-bench", help="verify only; leave timing to `kernelgen bench` / `optimize`")] = False,
    no_service: NoService = False,
    precision: Precision = None,
) -> None:
    """Generate <name>_triton.py, _baseline.py, _accuracy.py, _performance.py; verify; measure; log round 0."""
    from kernelgen.new import new_operator

    with errors_to_exit(), llm_warnings(), progress(f"kernelgen new {spec}") as step:
        options = llm_options(model=model, base_url=base_url, replay=replay, temperature=temperature,
                              max_tokens=max_tokens, repairs=repairs, timeout_s=llm_timeout, max_retries=max_retries,
                              replay_mismatch=replay_mismatch)
        result = new_operator(spec, out_root=out_dir, backend=backend, device=device, force=force,
                              llm_options=options, measure=not no_bench, on_step=step, no_service=no_service, note=_note)
    r0 = result.state.rounds[0]
    if result.moved_aside:
        what = "the half-made" if result.replaced_incomplete else "previous"
        out.print(f"{what} {result.op.path} kept as {result.moved_aside}", highlight=False)
    if r0.accuracy:
        print_run(r0.accuracy, "Accuracy")
    if r0.performance:
        print_run(r0.performance, "Performance")
    out.print(f"wrote {result.op.path}/ ({result.op.name}_triton.py, _baseline.py, _accuracy.py, _performance.py, optimization_log.md)")
    raise typer.Exit(0 if result.correct else 1)


@app.command(cls=_Command)
def validate(
    spec: Annotated[Path, typer.Argument(help="operator spec (YAML), or a KernelBench-format problem (.py)", metavar="SPEC")],
    no_run: Annotated[bool, typer.Option("--no-run", help="only generate the offline kernel; do not run it once (instant, "
                                         "but its yes is no promise)")] = False,
) -> None:
    """Check a spec and write nothing; say which backend can build it (the offline kernel run once on the CPU)."""
    from kernelgen.backends import offline_verdict
    from kernelgen.spec.given import read_spec

    with errors_to_exit():
        s = read_spec(spec).spec
        with out.status("generating the offline kernel" + ("" if no_run else " and running it once on the CPU interpreter")):
            verdict = offline_verdict(s, run=not no_run)
    out.print(f"{spec}: ok — {s.name}({s.signature}), {len(s.test_cases)} test case(s) x {len(s.dtypes)} dtype(s), "
              f"{len(s.effective_perf_cases)} perf case(s)", highlight=False)
    out.print(verdict.describe(), highlight=False)


@app.command(cls=_Command)
def test(
    op_dir: Annotated[Path, typer.Argument(help="operator folder, e.g. generated/broadcast", metavar="OP_DIR")],
    device: Device = "auto",
    kernel: Annotated[Optional[Path], typer.Option("--kernel", help="check this kernel file instead")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="seeds per test case")] = 3,
    seed: Annotated[Optional[int], typer.Option("--seed", min=0, help="draw every input from this seed (a verdict "
                                                "names its own: this replays it); default: a hash of the kernel and "
                                                "the spec, so the same kernel gets the same verdict")] = None,
    no_service: NoService = False,
    precision: Precision = None,
) -> None:
    """Accuracy only (isolated, with the anti-cheat checks)."""
    from kernelgen.serve.commands import test_operator

    with errors_to_exit(), progress(f"kernelgen test {op_dir}") as step:
        checked = test_operator(op_dir, device=device, kernel=kernel, seeds=seeds, seed=seed, no_service=no_service,
                                on_step=step, warn=_warn, note=_note)
    print_run(checked.record, f"Accuracy of {checked.kernel}")
    raise typer.Exit(0 if checked.record.passed else 1)


@app.command(cls=_Command)
def bench(
    op_dir: Annotated[Path, typer.Argument(help="operator folder, e.g. generated/broadcast", metavar="OP_DIR")],
    device: Device = "auto",
    kernel: Annotated[Optional[Path], typer.Option("--kernel", help="time this kernel file instead")] = None,
    no_compile: Annotated[bool, typer.Option("--no-compile", help="skip the torch.compile baseline")] = False,
    no_peers: Annotated[bool, typer.Option("--no-peers", help="skip the peer libraries (Liger-Kernel, FlagGems)")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write the typed result (JSON) here")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="time eager, torch.compile and the peers again instead of "
                                        "taking them from the cache")] = False,
    graph: Annotated[bool, typer.Option("--graph", help="also time each case's recorded plan captured in a CUDA "
                                        "graph (GPU only)")] = False,
    no_service: NoService = False,
    precision: Precision = None,
) -> None:
    """Performance only: the kernel against PyTorch eager, torch.compile and the peer libraries."""
    from kernelgen.serve.commands import bench_operator

    with errors_to_exit(), progress(f"kernelgen bench {op_dir}") as step:
        checked = bench_operator(op_dir, device=device, kernel=kernel, no_compile=no_compile, no_peers=no_peers,
                                 fresh=fresh, json_out=json_out, no_service=no_service, graph=graph, on_step=step,
                                 warn=_warn, note=_note)
    print_run(checked.record, f"Performance of {checked.kernel}")
    raise typer.Exit(0 if checked.record.passed else 1)


@app.command(cls=_Command)
def serve(
    device: Device = "auto",
    idle: Annotated[Optional[float], typer.Option("--idle", help="minutes without a command before it stops "
                                                  "(default 10, or KERNELGEN_SERVICE_IDLE seconds)")] = None,
    status: Annotated[bool, typer.Option("--status", help="show this installation's KernelGen services and their GPU memory")] = False,
    stop: Annotated[bool, typer.Option("--stop", help="stop this installation's KernelGen services")] = False,
    everything: Annotated[bool, typer.Option("--all", help="with --status or --stop: every KernelGen service of this user, "
                                             "of any installation or Python environment")] = False,
) -> None:
    """The warm KernelGen service (per user and device): test, bench and new's checks run in it, each kernel
    still in a fresh sandboxed worker. Optional: commands start it themselves, and work without it."""
    from kernelgen.serve.control import service_status, start_service, stop_services

    with errors_to_exit():
        lines = service_status(everything) if status else stop_services(everything) if stop else start_service(device, idle)
    for line in lines:
        out.print(line, highlight=False, markup=False)


@app.command(cls=_Command)
def refresh(
    op_dir: Annotated[Path, typer.Argument(help="operator folder whose spec.yaml you edited", metavar="OP_DIR")],
    device: Device = "auto",
    no_bench: Annotated[bool, typer.Option("--no-bench", help="do not time the kernel on changed perf cases (optimize will)")] = False,
) -> None:
    """After editing OP_DIR/spec.yaml: re-render the tests from it and re-verify the best kernel; rounds are kept."""
    from kernelgen.refresh import refresh_operator

    with errors_to_exit(), progress(f"kernelgen refresh {op_dir}") as step:
        result = refresh_operator(op_dir, device=device, measure=not no_bench, on_step=step)
    f = result.record
    if f is None:
        out.print(f"{op_dir}: spec.yaml is unchanged since the tests were rendered, and they are intact; nothing to refresh",
                  highlight=False)
        raise typer.Exit(0)
    out.print("What changed:\n" + "\n".join(f"  - {line}" for line in f.changes), highlight=False)
    if f.accuracy:
        print_run(f.accuracy, f"Accuracy of round {f.round}'s kernel against the edited spec")
    if f.performance:
        print_run(f.performance, "Performance")
    out.print(f"{f.outcome}; recorded in {result.op.path / 'optimization_log.md'}"
              + (f" (replaced files kept in {result.op.path / f.kept_dir})" if f.kept_dir else ""), highlight=False)
    raise typer.Exit(0 if result.passed else 1)


@app.command(cls=_Command)
def export(
    op_dir: Annotated[Path, typer.Argument(help="operator folder, e.g. generated/broadcast", metavar="OP_DIR")],
    out_file: Annotated[Optional[Path], typer.Option("--out", help="module to write (default: OP_DIR/<name>_op.py, "
                                                    "or <name>_kernelbench.py)")] = None,
    kernelbench: Annotated[bool, typer.Option("--kernelbench", help="write the ModelNew file KernelBench's evaluator loads "
                                              "(an operator made from a KernelBench problem file)")] = False,
) -> None:
    """Register the best kernel as torch.ops.kernelgen.<name> (a torch.library custom op): a module for models,
    torch.compile(fullgraph=True) and CUDA graphs. With --kernelbench: KernelBench's ModelNew instead."""
    from kernelgen.export import export_kernelbench, export_operator

    with errors_to_exit():
        result = (export_kernelbench if kernelbench else export_operator)(op_dir, out=out_file)
    if result.moved_aside:
        out.print(f"the earlier {result.path.name} differs: kept as {result.moved_aside}", highlight=False)
    verb = "unchanged" if result.unchanged else "wrote"
    if kernelbench:
        out.print(f"{verb} {result.path}: ModelNew with round {result.round}'s kernel, for KernelBench's evaluator "
                  "(self-contained: give it as the custom model source)", highlight=False)
        return
    out.print(f"{verb} {result.path}: torch.ops.kernelgen.{result.op.name}, round {result.round}'s kernel "
              f"(import the module, then call {result.op.name}(...); see its docstring). CUDA-graph capturable by "
              "construction: its recorded plan reads nothing on the host and launches on one stream", highlight=False)


@app.command(cls=_Command)
def log(op_dir: Annotated[Path, typer.Argument(help="operator folder", metavar="OP_DIR")]) -> None:
    """Render optimization_log.md in the terminal."""
    from kernelgen.opdir import open_operator
    from kernelgen.record.oplog import LOG_FILE

    with errors_to_exit():
        op = open_operator(op_dir)
        path = op.path / LOG_FILE
        if not path.is_file():
            raise KernelGenError(f"{path}: no log yet")
    out.print(Markdown(path.read_text(encoding="utf-8")))


@app.command(cls=_Command)
def optimize(
    op_dirs: Annotated[Optional[list[Path]], typer.Argument(help="operator folders; default: the current one, else every unfinished one under generated/", metavar="OP_DIR")] = None,
    rounds: Annotated[Optional[int], typer.Option("--rounds", help="finish this many optimization rounds in total, not this many more (default: the spec's max_rounds)")] = None,
    backend: Backend = "auto",
    target_speedup: Annotated[Optional[float], typer.Option("--target-speedup", help="stop at this geomean speedup vs eager (default: the spec's)")] = None,
    device: Device = "auto",
    model: Model = None,
    base_url: BaseUrl = None,
    replay: Replay = None,
    temperature: Temperature = None,
    max_tokens: MaxTokens = None,
    repairs: Repairs = None,
    llm_timeout: LLMTimeout = None,
    max_retries: MaxRetries = None,
    replay_mismatch: ReplayMismatch = None,
    candidates: Candidates = None,
    gpus: Annotated[Optional[str], typer.Option("--gpus", help="GPUs to time a round's candidates on, e.g. 0,1 (or all, or a count): "
                                                "the first is the operator's own, each other one times its share of the "
                                                "candidates against the best on that GPU")] = None,
    precision: Precision = None,
) -> None:
    """Diagnose, propose, gate, time against the best, keep only real wins; log every round. Resumable."""
    from kernelgen.devices import INTERPRETER_WARNING, make_current, resolve_device
    from kernelgen.gpus import search_devices
    from kernelgen.backends import make_proposer
    from kernelgen.optimize.loop import optimize_operator, select_operators
    from kernelgen.record.report import rounds_table

    if rounds is not None and rounds < 0:
        err.print("error: --rounds must be >= 0")
        raise typer.Exit(2)
    outcomes = []
    with errors_to_exit(), llm_warnings():
        spread = search_devices(gpus, device) if gpus is not None else []
        dev = spread[0] if spread else resolve_device(device)
        make_current(dev)
        ops = select_operators(list(op_dirs or []), target=target_speedup,
                               on_skip=lambda msg: err.print(f"[yellow]note:[/] {msg}", markup=True, highlight=False))
        if not ops:
            out.print("nothing to optimize: every operator under generated/ has reached its target or was skipped")
            raise typer.Exit(0)
        if dev.interpreter:
            err.print(f"[bold yellow]WARNING:[/] {INTERPRETER_WARNING} Keep/revert decisions are an interpreter dry run — not a measurement.")
        options = llm_options(model=model, base_url=base_url, replay=replay, temperature=temperature,
                              max_tokens=max_tokens, repairs=repairs, timeout_s=llm_timeout, max_retries=max_retries,
                              replay_mismatch=replay_mismatch, candidates=candidates)
        for i, op in enumerate(ops, 1):
            with progress(f"[{i}/{len(ops)}] optimizing {op.name}") as step:
                proposer = make_proposer(backend, op, dev, options)
                outcomes.append(optimize_operator(op, dev, proposer, rounds=rounds, target=target_speedup, on_step=step,
                                                   search_devices=spread[1:]))
    for o in outcomes:
        out.print(rounds_table(o.state, o.op.spec))
        out.print(f"{o.op.name}: stopped — {o.stopped_because.rstrip('.')}; log {o.op.path / 'optimization_log.md'}, plot {o.op.path / 'speedup.png'}")


@app.command(cls=_Command)
def batch(
    specs: Annotated[list[Path], typer.Argument(help="spec files (YAML, or KernelBench-format .py), or folders of them (every *.yaml and *.py inside)")],
    out_dir: Annotated[Path, typer.Option("--out", help="parent folder of the operator folders")] = Path("generated"),
    rounds: Annotated[Optional[int], typer.Option("--rounds", help="optimization rounds per operator (default: each spec's max_rounds)")] = None,
    backend: Backend = "auto",
    device: Device = "auto",
    gpus: Annotated[str, typer.Option("--gpus", help="local engine: all | a count N | ids 0,1 (one id: 3,). "
                                      "Without a GPU, N Triton-interpreter workers")] = "all",
    engine: Annotated[str, typer.Option("--engine", help="local (one worker per GPU here) | ray (one task per operator, any host)")] = "local",
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="an existing Ray cluster, e.g. ray://head:10001 or auto (default: a local one)")] = None,
    step_timeout: Annotated[float, typer.Option("--step-timeout", help="seconds one step (new, optimize, bench) of one operator may take")] = 3600.0,
    per_gpu: Annotated[str, typer.Option("--per-gpu", help="local engine: workers per GPU, or auto; an operator starts only "
                                         "where its estimated memory fits, a large one alone; timings take the GPU one at a time")] = "auto",
    dtypes: Annotated[str, typer.Option("--dtypes", help="dtypes checked: deciding (those that decide the verdict: a KernelBench "
                                        "problem's float32) | all (every dtype of the spec) | auto (deciding for KernelBench .py "
                                        "problems, all for YAML specs)")] = "auto",
    model: Model = None,
    base_url: BaseUrl = None,
    replay: Replay = None,
    temperature: Temperature = None,
    max_tokens: MaxTokens = None,
    repairs: Repairs = None,
    precision: Precision = None,
) -> None:
    """Many operators: new, optimize and a final measurement for each, over every GPU (or a Ray cluster). Resumable."""
    from kernelgen.batch.progress import BatchProgress
    from kernelgen.batch.report import fast_p_text, summary_text
    from kernelgen.batch.run import BatchOptions, prepare_batch, run_prepared
    from kernelgen.batch.tables import op_columns, rich_table
    from kernelgen.devices import INTERPRETER_WARNING

    with errors_to_exit():
        options = BatchOptions(specs=specs, out_root=out_dir, rounds=rounds, backend=backend, device=device, gpus=gpus,
                               engine=engine, ray_address=ray_address, step_timeout_s=step_timeout, per_gpu=per_gpu, dtypes=dtypes,
                               llm_options=llm_options(model=model, base_url=base_url, replay=replay, temperature=temperature,
                                                       max_tokens=max_tokens, repairs=repairs))
        prepared = prepare_batch(options)
        out.print(f"kernelgen batch: {len(prepared.planned)} operator(s) on {prepared.engine.describe()}", highlight=False)
        if prepared.engine.device == "cpu":
            err.print(f"[bold yellow]WARNING:[/] {INTERPRETER_WARNING}")
        with BatchProgress(out, [p.name for p in prepared.planned]) as progress:
            outcome = run_prepared(prepared, progress)
    out.print(rich_table(op_columns(), outcome.report.operators, "KernelGen batch"))
    out.print(summary_text(outcome.report), highlight=False, markup=False)
    out.print(fast_p_text(outcome.report), highlight=False, markup=False)
    out.print("wrote " + ", ".join(str(p) for p in outcome.files.values()), highlight=False)
    raise typer.Exit(0 if outcome.all_correct else 1)


@app.command(cls=_Command)
def report(
    root: Annotated[Path, typer.Argument(help="folder of operator folders", metavar="DIR")] = Path("generated"),
    out_file: Annotated[Optional[Path], typer.Option("--out", help="markdown file to write (default: ROOT/report.md)")] = None,
) -> None:
    """A table over all operators: correct, best speedup, fraction of peak, rounds, tokens."""
    from kernelgen.record.report import build_report, fast_p_text, report_table, write_report

    with errors_to_exit():
        rows = build_report(root)
        path = write_report(root, rows, out_file)
    out.print(report_table(rows))
    if rows:
        out.print(fast_p_text(rows), highlight=False, markup=False)
    out.print(f"wrote {path}")


@app.command("config", cls=_Command)
def config_cmd() -> None:
    """Show the effective LLM settings and where each comes from (the key is never shown)."""
    from rich.table import Table

    from kernelgen.llm.config import config_dir, config_file, describe_settings, load_settings

    with errors_to_exit():
        settings = load_settings()
    table = Table("setting", "value", "from")
    for name, value, source in describe_settings(settings):
        table.add_row(name, value, source)
    out.print(table)
    path = config_file()
    where = path if path else f"none yet (settings go in {config_dir() / 'config.toml'})"
    out.print(f"config file: {where}", highlight=False)
    out.print("precedence: command line > KERNELGEN_* > OPENAI_API_KEY / OPENAI_BASE_URL > config file > defaults",
              highlight=False)


def _warn(text: str) -> None:
    err.print(f"[bold yellow]WARNING:[/] {text}")


def _note(text: str) -> None:
    err.print(f"[yellow]note:[/] {escape(text)}", markup=True, highlight=False)


def main() -> None:
    app(prog_name="kernelgen")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
