"""The library's advice in command-line words: ``--skip-damaged``, not ``skip_damaged=True``.

The library's errors speak Python (``open it with read_only=True``): right for a script, no help
at a shell prompt. :func:`cli_words` rewrites the known pieces of advice into what to type
instead; :func:`~trajstore.cli._output.fail` and the CLI's warnings pass every message through it.
The library's messages stay as they are; each rewrite is tested against the message the library
really raises (``tests/test_messages_cli.py``), so a reworded library message shows up as a failure.
"""

from __future__ import annotations

import re

#: Commands that only read a buffer folder: they take no writer lock and run while another process writes.
READING_COMMANDS = "info, stats, episodes, preview, verify, copy, push"

#: ``(pattern, replacement)``, applied in order to every CLI error and warning.
REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    # _lock.WriterLock: another writer holds the folder.
    (r"\(another process, or another object in this one\); open it with read_only=True, or close the writer first",
     f"by another process; the commands that only read it ({READING_COMMANDS}) run meanwhile; to write to it "
     "(record --resume), let the other writer finish or stop it, then run the command again"),
    # A writer's open of a damaged folder.
    (r"open it read-only to read the other episodes, or copy them out with",
     f"the commands that only read it ({READING_COMMANDS}) read the other episodes; copy them out with"),
    (r"open it read-only to read the rest",
     f"the commands that only read it ({READING_COMMANDS}) read the rest"),
    (r"\(see ReplayBuffer\.damaged, on_damaged= of the samplers\)", "(`trajstore verify PATH` lists them)"),
    # Options that have a flag of the same name.
    (r"pass skip_damaged=True \(--skip-damaged\)", "pass --skip-damaged"),
    (r"allow_empty=True, on the command line --allow-empty", "pass --allow-empty"),
    (r"open it with read_only=False to write", "write to it with a command that writes (record --resume)"),
))


def cli_words(text: str) -> str:
    """``text`` with each piece of Python advice of :data:`REWRITES` replaced by its command-line form."""
    for pattern, replacement in REWRITES:
        text = pattern.sub(replacement, text)
    return text
