"""The view: one consistent snapshot of what a buffer holds, and the one rule for reads that race a writer.

A :class:`View` is a ring state and an episode table committed together: everything a read needs
to turn logical indices into slots and episodes. It is immutable; a reader's view is replaced as a
whole by :meth:`FolderView.refresh`, never edited.

How a reader of a folder takes a view (:func:`take_view`, used by ``load_from`` and ``refresh``
alike): the metadata file's signature first, then the metadata and the episode log it names. A
commit between the two steps gives a newer view under an older signature, so the next refresh
reads again (harmless); the other order would give an older view under the newer signature, and
the staleness check below would miss the writer's next reuse of slots (a torn step, no error).

The staleness rule (:func:`is_stale`): a writer reuses the slot of a committed step only after it
committed a view without that step, in three cases:

* a ring overwrites its oldest steps (the committed view drops them first): the oldest held step
  number rises past a step that was read;
* ``discard_episode`` gives the slots of the open episode's steps to the next appends: the episode
  table's ``discards`` counter rises (conservative: every read step of the episode open in the
  read's view counts);
* a ring reuses the slot of a final observation after its episode left the buffer: the episode no
  longer has the final observation number that was read.

A read under ``view`` is whole unless one of these happened to something it read by the time of the
newest view. The one retry policy (:func:`retrying`) reads again under the refreshed view, at most
:data:`MAX_READ_ATTEMPTS` times, then gives up with :class:`~trajstore.errors.RetriesExhaustedError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from trajstore._damage import damaged_file
from trajstore.errors import FormatError, RetriesExhaustedError, StaleReadError
from trajstore.replay_buffer.committed_table import read_committed
from trajstore.replay_buffer.episode_log import EpisodeLog
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.metadata import META_FILE, file_signature
from trajstore.replay_buffer.ring import RingState
from trajstore.storages._selection import Selection

#: Reads of a live buffer that raced the writer are done again under the new view at most this many times.
MAX_READ_ATTEMPTS = 16

T = TypeVar("T")


@dataclass(frozen=True)
class View:
    """The ring state and episode table of one commit (or of the writer's own appends).

    Attributes:
        ring: where the held steps are.
        episodes: the episode table; a snapshot for a reader, the writer's live table for the writer
            (whose reads never race itself).
    """

    ring: RingState
    episodes: EpisodeTable

    @property
    def count(self) -> int:
        return self.ring.count

    @property
    def first_step(self) -> int:
        """Step number of logical index 0."""
        return self.ring.first_step

    def slots_of(self, logical: Selection) -> Selection:
        return self.ring.slots_of(logical)


@dataclass
class Touched:
    """What one read used, filled before its storage I/O: logical indices ``first..last`` of its view
    and the ``(episode id, final observation number)`` pairs of the final observations it read."""

    first: int | None = None
    last: int | None = None
    finals: list[tuple[int, int]] = field(default_factory=list)

    def steps(self, first: int, last: int) -> None:
        self.first = first if self.first is None else min(self.first, first)
        self.last = last if self.last is None else max(self.last, last)


def is_stale(view: View, now: View, touched: Touched) -> bool:
    """True if what ``touched`` records of a read under ``view`` may have been rewritten by the time
    the writer committed ``now`` (see the module docstring). Pure arithmetic."""
    if touched.first is not None and touched.last is not None:
        if view.first_step + touched.first < now.first_step:
            return True  # the ring overwrote the oldest steps read
        open_start = view.episodes.open_start
        if (now.episodes.discards != view.episodes.discards and open_start is not None
                and view.first_step + touched.last >= open_start):
            return True
    return any(now.episodes.final_number(episode) != number for episode, number in touched.finals)


class Views(Protocol):
    """Where a buffer's reads get their view (a reader of a folder, the writer itself, a fixed view)."""

    #: Another process may reuse slots while this one reads them.
    races_writer: bool
    #: What the errors call the buffer (its folder, or ``"memory"``).
    name: str

    def current(self) -> View:
        """The view to read under now (the writer first writes its staged steps)."""

    def latest(self) -> View:
        """The newest committed view, without adopting it."""

    def refresh(self) -> bool:
        """Adopt the newest committed view; True if it changed."""


class FixedView:
    """A view that never changes: an in-memory buffer seen from a forked child, or nothing to race."""

    races_writer = False

    def __init__(self, view: View, name: str = "memory"):
        self._view, self.name = view, name

    def current(self) -> View:
        return self._view

    def latest(self) -> View:
        return self._view

    def refresh(self) -> bool:
        return False


def take_view(folder: Path, *, read_only: bool, log: EpisodeLog | None = None, previous: EpisodeTable | None = None
              ) -> tuple[dict[str, Any], View, EpisodeLog | None, tuple[int, ...]]:
    """``(metadata, view, episode log, signature)`` of the folder's committed state, the signature
    taken first (see the module docstring).

    Raises:
        FormatError: a missing or damaged metadata file or episode log, or a ring and table that disagree.
    """
    try:
        signature = file_signature(folder)
    except FileNotFoundError:
        raise FormatError(f"{folder} is not a trajstore buffer folder: {folder / META_FILE} does not exist") from None
    meta, episodes, log = read_committed(folder, read_only=read_only, log=log, previous=previous)
    with damaged_file(folder / META_FILE):
        ring = RingState.from_json(meta["ring"])
        episodes.check_within(ring)
    return meta, View(ring, episodes), log, signature


class FolderView:
    """A reader's view of a folder that a writer (in another process, or none) commits to.

    The view a reader reads under changes only when it asks (:meth:`refresh`), or after a read that
    raced the writer (which raises :class:`~trajstore.errors.StaleReadError` and adopts the newest view):
    between the two, ``len(rb)``, ``rb.episodes`` and logical indices keep their meaning. The newest
    committed view is looked at after every read (:meth:`latest`), to check the read against it.

    Attributes:
        folder: the buffer folder.
        meta: the metadata the current view was read from.
        signature: the metadata file's signature taken before the current view was read.
    """

    races_writer = True

    def __init__(self, folder: Path, meta: dict[str, Any], view: View, log: EpisodeLog | None,
                 signature: tuple[int, ...] | None, on_refresh: Callable[[dict[str, Any], View], None]):
        self.folder, self.meta, self._view, self._log = folder, meta, view, log
        self.name = str(folder)
        self.signature = signature
        # The newest view seen (not adopted yet), its metadata and the signature taken before it.
        self._latest, self._latest_meta, self._latest_signature = view, meta, signature
        self._on_refresh = on_refresh  # the storages see at least what the new metadata names

    def current(self) -> View:
        return self._view

    def latest(self) -> View:
        """The newest committed view, not adopted; the files are read again only after the metadata
        file changed since the last look."""
        now = file_signature(self.folder)
        if self._latest_signature is None or now != self._latest_signature:
            meta, view, self._log, signature = take_view(self.folder, read_only=True, log=self._log,
                                                         previous=self._latest.episodes)
            self._latest, self._latest_meta, self._latest_signature = view, meta, signature
        return self._latest

    def refresh(self) -> bool:
        """Adopt the newest committed view; True if it differs from the current one."""
        latest = self.latest()
        if latest is self._view:
            return False
        self._on_refresh(self._latest_meta, latest)
        self.meta, self._view, self.signature = self._latest_meta, latest, self._latest_signature
        return True

    def forget_signature(self) -> None:
        """Read the files again at the next look (a forked child: the parent's handles are not its own)."""
        self._latest_signature = None

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def check_read(views: Views, view: View, touched: Touched, cause: BaseException | None = None) -> None:
    """After a read under ``view`` (that raised ``cause``, if given): if the writer may have rewritten what
    it used by the newest committed view, adopt that view and raise :class:`StaleReadError`; else return
    (the reader keeps its view).

    A read that failed (``cause``) with nothing stale is not this function's to judge: it returns and
    the caller raises ``cause``.
    """
    if not views.races_writer:
        return
    latest = views.latest()
    if latest is view or not is_stale(view, latest, touched):
        return
    views.refresh()
    raise StaleReadError(f"the writer of {views.name} overwrote or discarded steps while they were read; "
                         f"the view is refreshed (now {latest.count} steps from step number "
                         f"{latest.first_step}): index again") from cause


def read_once(views: Views, read: Callable[[View, Touched], T]) -> T:
    """``read(view, touched)`` under the current view, checked afterwards (:func:`check_read`).

    Raises:
        StaleReadError: the writer reused what the read used; the view is refreshed, index again.
        FormatError: a damaged file (not a race: raised as it is).
    """
    view = views.current()
    touched = Touched()
    try:
        result = read(view, touched)
    except FormatError as exc:
        # What looks like damage may be slots the writer was rewriting: stale only if the view moved so.
        check_read(views, view, touched, exc)
        raise
    check_read(views, view, touched)
    return result


def retrying(views: Views, read: Callable[[View, Touched], T], what: str) -> T:
    """:func:`read_once`, done again under the refreshed view after each race with the writer.

    ``read`` draws its own indices from the view it is given (a sampler), so a retry draws again.

    Raises:
        RetriesExhaustedError: :data:`MAX_READ_ATTEMPTS` reads in a row raced the writer (names ``what``).
    """
    for _ in range(MAX_READ_ATTEMPTS):
        try:
            return read_once(views, read)
        except StaleReadError:
            continue
    raise RetriesExhaustedError(f"{what} from {views.name}: the writer reused the slots being read "
                                f"{MAX_READ_ATTEMPTS} times in a row")
