"""``trajstore formats``: the formats trajstore imports and exports, as a table.

Reads the registry (:data:`trajstore.interop.formats.FORMATS`) and imports none of the format modules,
so it runs without any format's optional dependencies.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from trajstore.cli._output import QUICK_PROGRESS_HELP, progress_option
from trajstore.interop.formats import FORMATS, Format


def _ways(fmt: Format) -> str:
    return " / ".join(way for way, fn in (("import", fmt.import_fn), ("export", fmt.export_fn)) if fn)


def formats_table() -> Table:
    """The registry as a rich table: format, what it is, import/export, the pip extra, keeps, loses."""
    table = Table(title="trajstore import FORMAT / export FORMAT", show_lines=True)
    table.add_column("format", style="bold", no_wrap=True)
    table.add_column("what")
    table.add_column("import/export", no_wrap=True)
    table.add_column("extra", no_wrap=True)
    table.add_column("keeps")
    table.add_column("loses")
    for fmt in FORMATS.values():
        extra = f"trajstore[{fmt.extra}]" if fmt.extra else "-"
        table.add_row(*(escape(cell) for cell in (fmt.name, fmt.title, _ways(fmt), extra, fmt.keeps, fmt.loses)))
    return table


def formats_command(progress: bool = progress_option(QUICK_PROGRESS_HELP)) -> None:
    """List the formats trajstore imports and exports, what a round trip keeps and loses, and the pip extra
    each needs."""
    from trajstore.cli._output import console

    console.print(formats_table())
