"""The whole batch: check the options and the specs, pick the engine, skip what an earlier run
finished (nothing that decides its result changed: kernelgen.batch.basis), run the rest, write the
report.

Everything that can be refused (options, missing paths, `--gpus` beyond the visible devices, Ray not
installed or not reachable) is refused by `prepare_batch`, before anything is written."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelgen.batch.ahead import wanted as baselines_ahead
from kernelgen.batch.basis import JobBasis, spec_data, tool_identity
from kernelgen.batch.engine import Engine, Event, OnEvent
from kernelgen.batch.job import JobRequest
from kernelgen.batch.plan import PlannedOp, plan_specs
from kernelgen.batch.live import LiveReport
from kernelgen.batch.report import BatchReport
from kernelgen.batch.resume import JobResult, load_job, phase_of
from kernelgen.errors import UsageError
from kernelgen.fsutil import atomic_write

WORK_DIR = "_batch"  # under --out: logs/ (one per operator, one per worker) and locks/; no operator is named so
ENGINES = ("local", "ray")
# The LLM options `new` and `optimize` share, as the CLI spells them.
LLM_FLAGS = {"model": "--model", "base_url": "--base-url", "replay": "--replay", "temperature": "--temperature",
             "max_tokens": "--max-tokens", "repairs": "--repairs"}


@dataclass
class BatchOptions:
    specs: list[Path]
    out_root: Path = Path("generated")
    rounds: int | None = None
    backend: str = "auto"
    device: str = "auto"
    gpus: str = "all"
    engine: str = "local"
    ray_address: str | None = None
    llm_options: dict[str, object] = field(default_factory=dict)
    step_timeout_s: float = 3600.0
    per_gpu: str | int = "auto"  # local engine: workers per GPU (kernelgen.batch.targets); timings still one at a time
    dtypes: str = "auto"  # which dtypes are checked: auto | deciding | all (kernelgen.batch.plan)


@dataclass
class PreparedBatch:
    options: BatchOptions
    planned: list[PlannedOp]
    engine: Engine


@dataclass
class BatchOutcome:
    report: BatchReport
    files: dict[str, Path]
    results: list[JobResult]

    @property
    def all_correct(self) -> bool:
        return bool(self.results) and all(r.correct for r in self.results)


def llm_flags(options: dict[str, object]) -> list[str]:
    flags: list[str] = []
    for key, value in options.items():
        if key not in LLM_FLAGS:
            raise UsageError(f"unknown LLM option {key!r}")
        if value is not None:
            flags += [LLM_FLAGS[key], str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    return flags


def make_engine(opts: BatchOptions) -> Engine:
    if opts.engine == "local":
        if opts.ray_address:
            raise UsageError("--ray-address is for --engine ray")
        from kernelgen.batch.local import LocalEngine
        from kernelgen.batch.targets import plan_targets

        return LocalEngine(plan_targets(opts.gpus, opts.device, opts.per_gpu), Path(opts.out_root).resolve() / WORK_DIR)
    if opts.engine == "ray":
        if str(opts.per_gpu) not in ("auto", "1"):
            raise UsageError(f"--per-gpu {opts.per_gpu} is for --engine local", hint="Ray gives each operator one device of the cluster")
        if opts.gpus != "all":
            raise UsageError(f"--gpus {opts.gpus} is for --engine local", hint="Ray gives each operator one device of the cluster; leave --gpus out")
        from kernelgen.batch.ray_engine import RayEngine

        return RayEngine(opts.ray_address, opts.device)
    raise UsageError(f"--engine {opts.engine}: choose {' or '.join(ENGINES)}")


def prepare_batch(opts: BatchOptions) -> PreparedBatch:
    if opts.rounds is not None and opts.rounds < 0:
        raise UsageError("--rounds must be >= 0")
    if opts.step_timeout_s <= 0:
        raise UsageError("--step-timeout must be > 0")
    llm_flags(opts.llm_options)
    baselines_ahead(opts.device)  # KERNELGEN_BATCH_BASELINES refused here, before any work, if it is not one of its values
    planned = plan_specs(opts.specs, opts.dtypes)
    return PreparedBatch(opts, planned, make_engine(opts))


def engine_basis(engine: Engine, opts: BatchOptions) -> JobBasis:
    """What decides every operator's result in this batch, besides its spec."""
    return JobBasis(tool=tool_identity(), device=engine.device_model(), backend=opts.backend, options=llm_flags(opts.llm_options))


def spec_for_new(p: PlannedOp, out: Path) -> Path:
    """The file `kernelgen new` reads: the one given, or the spec this batch decided on (derived from a
    KernelBench problem, narrowed to its deciding dtypes) written under `_batch/specs/`."""
    if not p.text:
        return p.spec_path
    path = out / WORK_DIR / "specs" / f"{p.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, p.text)
    return path


def _request(p: PlannedOp, opts: BatchOptions, device: str, basis: JobBasis) -> JobRequest:
    out = Path(opts.out_root).resolve()
    need = None
    t0 = time.monotonic()
    ahead = baselines_ahead(device)
    ahead_b = None
    if device == "cuda":
        from kernelgen.batch.footprint import ahead_bytes, memory_need

        need = memory_need(p.spec, ahead=ahead)
        ahead_b = ahead_bytes(p.spec) if ahead else None
    return JobRequest(name=p.name, spec_file=str(spec_for_new(p, out)), spec_label=p.label, out_root=str(out),
                      log_file=str(out / WORK_DIR / "logs" / f"{p.name}.log"), rounds=opts.rounds,
                      backend=opts.backend, device=device, options=basis.options, step_timeout_s=opts.step_timeout_s,
                      spec_data=spec_data(p.spec), basis=basis, need_bytes=need, ahead=ahead, ahead_bytes=ahead_b,
                      derive_s=round(p.seconds + time.monotonic() - t0, 2))


def run_prepared(batch: PreparedBatch, on_event: OnEvent = lambda e: None) -> BatchOutcome:
    opts, engine = batch.options, batch.engine
    out = Path(opts.out_root)
    (out / WORK_DIR / "logs").mkdir(parents=True, exist_ok=True)
    live = LiveReport(out, batch.planned, engine.describe(), opts.rounds)
    basis = engine_basis(engine, opts)
    jobs: list[tuple[int, JobRequest]] = []
    for i, p in enumerate(batch.planned):
        if not p.valid:
            live.record(i, JobResult(name=p.name, spec=p.label, status="invalid", reason=p.problem, rounds=opts.rounds))
        elif phase_of(out / p.name, spec_data(p.spec), basis, opts.rounds)[0] == "done":
            stored = load_job(out / p.name)
            assert stored is not None
            live.record(i, stored.model_copy(update={"skipped": True}))
        else:
            jobs.append((i, _request(p, opts, engine.device, basis)))
    for i, result in sorted(live.now.items()):
        on_event(Event(result.name, "done", "", result=result))
    index = {j.name: i for i, j in jobs}

    def ended(event: Event) -> None:
        on_event(event)
        if event.kind == "done" and event.result is not None and event.op in index:
            live.record(index[event.op], event.result)
            live.write(plot=False)  # the report says where the batch is, should it stop before the end

    ran = engine.run([j for _, j in jobs], ended) if jobs else []
    for (i, _), r in zip(jobs, ran):
        live.record(i, r)
    report, files = live.write()
    return BatchOutcome(report, files, live.results())


def run_batch(opts: BatchOptions, on_event: OnEvent = lambda e: None) -> BatchOutcome:
    return run_prepared(prepare_batch(opts), on_event)
