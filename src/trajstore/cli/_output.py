"""What every ``trajstore`` command shares: the console, one-line errors, exit codes, progress bars.

Exit codes (also in ``trajstore --help`` and the README):

* 0 (:data:`EXIT_OK`): done; for ``verify``, no damage found.
* 1 (:data:`EXIT_DAMAGE`): ``verify`` found damage (or a step that differs from ``--reference``); ``copy``
  met a damaged episode without ``--skip-damaged``; ``push`` met a damaged folder.
* 2 (:data:`EXIT_BAD_INPUT`): the command could not run as asked: a path that is not a buffer
  folder, an unknown episode, a bad option or selection (click's own usage errors are 2 as well).
* 130 (:data:`EXIT_INTERRUPTED`): Ctrl-C.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Iterable

import typer
from rich.console import Console
from rich.markup import escape

from trajstore.cli._advice import cli_words

EXIT_OK = 0
EXIT_DAMAGE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = ("Exit status: 0 ok; 1 damage found (verify; copy without --skip-damaged; push); 2 bad input (not a buffer folder, unknown "
                   "episode, bad option); 130 interrupted.")

#: Seconds of work before a progress bar appears (quick commands print no bar).
PROGRESS_DELAY_S = 1.0
PROGRESS_HELP = "Show a progress bar on stderr once the work takes a second (--no-progress: never)."
#: ``--progress/--no-progress`` of a quick command: taken so a script can pass it to every command.
QUICK_PROGRESS_HELP = "Taken by every command (for scripts); this one is quick and shows no bar."

# Not a terminal (make, CI logs): rich would wrap at 80 columns; tables read better wider.
console = Console(width=None if sys.stdout.isatty() else 132)
#: Errors go to stderr, beside the warnings, so `cmd > out` still shows them.
error_console = Console(stderr=True, width=None if sys.stderr.isatty() else 132)


def fail(exc: BaseException | str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print the error on one unwrapped line on stderr (so it can be grepped), its Python advice in command-line
    words (:func:`~trajstore.cli._advice.cli_words`); returns the ``typer.Exit`` to raise."""
    error_console.print(f"[red]error:[/red] {escape(cli_words(' '.join(str(exc).split())))}", soft_wrap=True)
    return typer.Exit(code)


def show_own_warnings() -> None:
    """From now on print trajstore's own warnings (:class:`~trajstore.damage.DamagedBufferWarning`,
    :class:`~trajstore.errors.SelectionWarning`, :class:`~trajstore.errors.RoutingWarning`) as one line
    ``warning: <message>`` on stderr (in command-line words), each message once; other warnings keep Python's form."""
    from trajstore.damage import DamagedBufferWarning
    from trajstore.errors import RoutingWarning, SelectionWarning

    own = (DamagedBufferWarning, SelectionWarning, RoutingWarning)
    previous = warnings.showwarning
    if getattr(previous, "_trajstore_own", False):
        return
    shown: set[str] = set()

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if not issubclass(category, own):
            previous(message, category, filename, lineno, file, line)
            return
        text = cli_words(" ".join(str(message).split()))
        if text not in shown:
            shown.add(text)
            print(f"warning: {text}", file=sys.stderr if file is None else file, flush=True)

    show._trajstore_own = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def progress_option(help_text: str = PROGRESS_HELP) -> bool:
    """``--progress/--no-progress`` (default on), the one definition every command uses (the README: every
    command takes it); a quick command passes :data:`QUICK_PROGRESS_HELP` and ignores the value."""
    return typer.Option(True, "--progress/--no-progress", help=help_text)


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str, unit: str,
                 enabled: bool = True, unit_scale: bool = False) -> Any:
    """A tqdm bar on stderr (stdout keeps the report or the JSON), shown once the work has taken a second
    (:data:`PROGRESS_DELAY_S`); ``enabled=False`` shows nothing; ``unit_scale=True`` prints k, M, G
    (for bytes)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, leave=False,
                delay=PROGRESS_DELAY_S, unit_scale=unit_scale, unit_divisor=1024 if unit_scale else 1000)
