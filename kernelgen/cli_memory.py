"""`kernelgen memory ...`: the tuning memory's commands (parsed here, done in kernelgen.memory.commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelgen.cli_options import _Command
from kernelgen.console import errors_to_exit, out

memory_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="The tuning memory: what judged rounds measured on each device (SQLite in the cache directory).")

DeviceFilter = Annotated[Optional[str], typer.Option("--device", help="only this device (its full name, as listed)")]
FamilyFilter = Annotated[Optional[str], typer.Option("--family", help="only this family (softmax, pointwise, ...)")]
OperatorFilter = Annotated[Optional[str], typer.Option("--operator", help="only what this operator's rounds measured")]
OriginFilter = Annotated[Optional[str], typer.Option("--origin", help="measured (on this machine) or imported")]


@memory_app.command("list", cls=_Command)
def memory_list(device: DeviceFilter = None, family: FamilyFilter = None, operator: OperatorFilter = None,
                origin: OriginFilter = None) -> None:
    """Every entry (or those matching the filters), oldest first."""
    from kernelgen.memory.commands import entries_table, list_entries

    with errors_to_exit():
        path, rows = list_entries(device=device, family=family, operator=operator, origin=origin)
    out.print(entries_table(rows) if rows else "no entries", highlight=False)
    out.print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'} in {path}", highlight=False)


@memory_app.command("show", cls=_Command)
def memory_show(entry_id: Annotated[int, typer.Argument(help="an id from `kernelgen memory list`", metavar="ID")]) -> None:
    """One entry in full (JSON)."""
    from kernelgen.memory.commands import show_entry

    with errors_to_exit():
        entry = show_entry(entry_id)
    out.print_json(entry.model_dump_json())


@memory_app.command("export", cls=_Command)
def memory_export(out_file: Annotated[Path, typer.Argument(help="JSON file to write", metavar="FILE")],
                  device: DeviceFilter = None, family: FamilyFilter = None) -> None:
    """Write the entries (or those matching the filters) to a JSON file another machine can import."""
    from kernelgen.memory.commands import export_to

    with errors_to_exit():
        n = export_to(out_file, device=device, family=family)
    out.print(f"wrote {n} entr{'y' if n == 1 else 'ies'} to {out_file}", highlight=False)


@memory_app.command("import", cls=_Command)
def memory_import(in_file: Annotated[Path, typer.Argument(help="a file written by `kernelgen memory export`", metavar="FILE")]) -> None:
    """Add a file's entries as hypotheses: proposed and re-timed here, never trusted as they are."""
    from kernelgen.memory.commands import import_from

    with errors_to_exit():
        total, new = import_from(in_file)
    out.print(f"imported {new} new entr{'y' if new == 1 else 'ies'} of {total} from {in_file} (origin: imported)", highlight=False)


@memory_app.command("forget", cls=_Command)
def memory_forget(entry_id: Annotated[Optional[int], typer.Option("--id", help="one entry")] = None,
                  device: DeviceFilter = None, family: FamilyFilter = None, operator: OperatorFilter = None,
                  origin: OriginFilter = None) -> None:
    """Delete the entries matching the filters (at least one)."""
    from kernelgen.memory.commands import forget_entries

    with errors_to_exit():
        n = forget_entries(id=entry_id, device=device, family=family, operator=operator, origin=origin)
    out.print(f"forgot {n} entr{'y' if n == 1 else 'ies'}", highlight=False)
