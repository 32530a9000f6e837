"""The command line's shared option types (typer `Annotated` aliases) and its usage-line convention."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperArgument, TyperCommand


class _Command(TyperCommand):
    """Usage lines in the usual convention — `SPEC`, `[OP_DIR]...` — where typer writes `{spec}`
    for a required argument and `<list[Path]>` for a list of paths."""

    def collect_usage_pieces(self, ctx) -> list[str]:  # noqa: ANN001 - click.Context
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or param.name.upper()
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - TyperCommand's
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.nargs != 1:
                param.__class__ = _PathsArgument  # the one list argument (optimize's folders) is paths


class _PathsArgument(TyperArgument):
    def display_type_rich(self, ctx) -> str:  # noqa: ANN001
        return "<path>..."


Backend = Annotated[str, typer.Option("--backend", help="auto | offline | openai | replay", envvar="KERNELGEN_BACKEND")]
Device = Annotated[str, typer.Option("--device", help="auto | cuda | npu | cpu")]
NoService = Annotated[bool, typer.Option("--no-service", help="judge in this process, not in the warm KernelGen service "
                                         "(also KERNELGEN_NO_SERVICE=1); slower, same verdicts")]
# LLM options shared by `new` and `optimize`. There is deliberately no --api-key: a key on the
# command line ends up in shell history and process lists.
Model = Annotated[Optional[str], typer.Option("--model", help="LLM model name (else KERNELGEN_MODEL, the config file, gpt-4o)")]
BaseUrl = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1. "
                                                "There is no --api-key: keys come from OPENAI_API_KEY / KERNELGEN_API_KEY or the config file (see `kernelgen config`)")]
Replay = Annotated[Optional[Path], typer.Option("--replay", help="with --backend replay: a recorded llm/ folder")]
Temperature = Annotated[Optional[float], typer.Option("--temperature", help="LLM sampling temperature")]
MaxTokens = Annotated[Optional[int], typer.Option("--max-tokens", help="LLM reply length limit")]
Repairs = Annotated[Optional[int], typer.Option("--repairs", help="repair prompts after a failing candidate (default 3)")]
LLMTimeout = Annotated[Optional[float], typer.Option("--llm-timeout", help="seconds to wait for one LLM reply (else KERNELGEN_LLM_TIMEOUT, `timeout` in the config file, 300)")]
MaxRetries = Annotated[Optional[int], typer.Option("--max-retries", help="retries of a failed LLM request: 429, 5xx, timeouts (else KERNELGEN_MAX_RETRIES, the config file, 3)")]
ReplayMismatch = Annotated[Optional[str], typer.Option("--replay-mismatch", help="with --backend replay, when a prompt differs from the recorded one: warn (default) or refuse")]
def _use_precision(value: Optional[str]) -> Optional[str]:
    """--precision: checked, then exported for everything the command starts (the warm service, the
    sandboxed workers, a batch's steps: kernelgen.precision)."""
    if value:
        from kernelgen.errors import UsageError
        from kernelgen.precision import use_precision

        try:
            use_precision(value)
        except UsageError as e:
            raise typer.BadParameter(str(e)) from None
    return value


Precision = Annotated[Optional[str], typer.Option(
    "--precision", envvar="KERNELGEN_PRECISION", callback=_use_precision,
    help="float32 products in eager, torch.compile and the kernel: pytorch (PyTorch's defaults: matmuls IEEE, "
         "convolutions TF32), ieee, tf32, or per kind, e.g. matmul=tf32,conv=ieee (else KERNELGEN_TF32 / "
         "KERNELGEN_CONV_TF32, else PyTorch's defaults)")]
Candidates = Annotated[Optional[int], typer.Option("--candidates", help="LLM proposals per optimization round, each checked (else KERNELGEN_CANDIDATES, the config file, 1)")]


def llm_options(**given: object) -> dict:
    """The LLM options the user actually gave (None means: fall back to env, config file, default)."""
    return {k: v for k, v in given.items() if v is not None}
