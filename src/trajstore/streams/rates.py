"""Measured rates of a stream: from its int64-nanosecond timestamps, episode by episode, the sample
count, the median period and rate, the jitter, the gaps (dropped samples) and the samples out of order.

Periods are the differences of consecutive timestamps **within** an episode (the time between the
last sample of one episode and the first of the next is not a period). Of those periods:

* **duplicates** are periods of 0 (two samples with the same time), **non-monotonic** ones are
  negative (a sample older than the one before it; a stream buffer refuses them, so a folder that
  holds one is damaged); neither enters the statistics below;
* the **median period** is the median of the positive periods, the **rate** its inverse (Hz);
* the **jitter** is ``|period - median|`` over the positive periods that are not gaps: its standard
  deviation (of the signed differences, as a clock's jitter is quoted) and its 99th percentile (s);
* a **gap** is a period longer than ``gap_factor`` (default :data:`GAP_FACTOR`, 1.5) times the median:
  at least one sample missing. The largest gap is given with its episode and its time (of the sample
  before it, in ns and in s from the episode's first sample).

Differences of timestamps are taken without int64 overflow (:func:`differences`): a stream holding times
near both ends of int64 is measured, and its order judged, by comparing neighbours, not by ``np.diff``.

Everything is vectorised NumPy over all episodes at once; :func:`measure_rates` reads no files,
:func:`stream_rates` reads one stream's timestamps from a stream buffer (through its public API).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from trajstore.streams import StreamBuffer

#: A period longer than this many median periods is a gap.
GAP_FACTOR = 1.5
#: Percentile of ``|period - median|`` given as :attr:`StreamRates.jitter_p99_s`.
JITTER_PERCENTILE = 99.0
NS = 1e-9


@dataclass(frozen=True)
class StreamRates:
    """What :func:`measure_rates` measured of one stream (times in seconds unless named ``_ns``).

    Attributes:
        samples: samples over all episodes.
        episodes: episodes given; ``episodes_with_samples``: those with at least one sample.
        periods: consecutive pairs within episodes (``samples - episodes_with_samples``).
        span_s: sum over episodes of last minus first sample time.
        median_period_s, rate_hz: median positive period and ``1 / median_period_s``; ``None`` without one.
        mean_rate_hz: ``positive periods / span_s`` (lower than ``rate_hz`` when samples are missing).
        jitter_std_s, jitter_p99_s: std of ``period - median`` and 99th percentile of its absolute value,
            over the positive periods that are not gaps; ``None`` without any.
        gaps: periods longer than ``gap_factor * median_period_s``.
        missing_estimate: samples the gaps lost, estimated as ``sum(round(gap / median) - 1)``.
        max_gap_s: the longest gap (``None`` without gaps); ``max_gap_episode``: its episode (the id given,
            else the position); ``max_gap_at_ns``: time of the sample before it; ``max_gap_at_s``: that
            time from the episode's first sample.
        duplicates: periods of exactly 0; ``non_monotonic``: negative periods (``first_non_monotonic``:
            ``(episode, index of the later sample within the episode)`` of the first, else ``None``).
        gap_factor: the factor used.
    """

    samples: int
    episodes: int
    episodes_with_samples: int
    periods: int
    span_s: float
    median_period_s: float | None
    rate_hz: float | None
    mean_rate_hz: float | None
    jitter_std_s: float | None
    jitter_p99_s: float | None
    gaps: int
    missing_estimate: int
    max_gap_s: float | None
    max_gap_episode: int | None
    max_gap_at_ns: int | None
    max_gap_at_s: float | None
    duplicates: int
    non_monotonic: int
    first_non_monotonic: tuple[int, int] | None
    gap_factor: float = GAP_FACTOR

    @property
    def ordered(self) -> bool:
        """No negative period: timestamps non-decreasing within every episode."""
        return self.non_monotonic == 0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["first_non_monotonic"] = None if self.first_non_monotonic is None else list(self.first_non_monotonic)
        return d

    def line(self) -> str:
        """One line: ``"30.0 Hz (median period 33.33 ms), jitter std 0.41 ms / p99 1.20 ms, 2 gaps (max
        100.0 ms in episode 1 at 2.033 s), 0 duplicates"``."""
        if self.median_period_s is None:
            text = f"{self.samples} sample{'s' if self.samples != 1 else ''}: no period"
        else:
            text = (f"{self.rate_hz:.4g} Hz (median period {_ms(self.median_period_s)}), jitter std "
                    f"{_ms(self.jitter_std_s)} / p99 {_ms(self.jitter_p99_s)}, {self.gaps} gap"
                    f"{'s' if self.gaps != 1 else ''}")
            if self.gaps:
                text += (f" (max {_ms(self.max_gap_s)} in episode {self.max_gap_episode} at "
                         f"{self.max_gap_at_s:.3f} s)")
        text += f", {self.duplicates} duplicate{'s' if self.duplicates != 1 else ''}"
        if self.non_monotonic:
            text += f", {self.non_monotonic} OUT OF ORDER"
        return text


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g} ms"


def differences(later: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """``later - earlier`` of two int64-nanosecond arrays of one shape, as float64 ns, without the int64
    overflow of a plain subtraction (``np.diff([1, int64.min])`` wraps to a positive number): the sign comes
    from comparing the neighbours, the magnitude from an unsigned subtraction (exact: it is below 2**64)."""
    later = np.asarray(later, np.int64)
    earlier = np.asarray(earlier, np.int64)
    up = later >= earlier
    lo, hi = later.view(np.uint64), earlier.view(np.uint64)
    magnitude = np.where(up, lo - hi, hi - lo).astype(np.float64)
    return np.where(up, magnitude, -magnitude)


def measure_rates(timestamps: Sequence[np.ndarray], episode_ids: Sequence[int] | None = None, *,
                  gap_factor: float = GAP_FACTOR) -> StreamRates:
    """Measure one stream's rates from its timestamps, one array per episode.

    Args:
        timestamps: per episode, the sample times, int64 nanoseconds ``(N_k,)`` in recorded order
            (empty arrays allowed). Other integer dtypes are converted; floats are refused.
        episode_ids: the episodes' ids, to name them in the result (default: their positions).
        gap_factor: a period longer than ``gap_factor`` median periods is a gap (> 1).

    Returns:
        :class:`StreamRates`.

    Raises:
        TypeError: an array is not of an integer dtype (timestamps are int64 ns).
        ValueError: an array is not 1-D, ``episode_ids`` has another length, ``gap_factor <= 1``.
    """
    if not gap_factor > 1:
        raise ValueError(f"gap_factor must be > 1, got {gap_factor!r}")
    arrays = [np.asarray(t) for t in timestamps]
    for k, t in enumerate(arrays):
        if t.ndim != 1:
            raise ValueError(f"timestamps of episode {k}: expected a 1-D array, got shape {t.shape}")
        if t.size and not np.issubdtype(t.dtype, np.integer):
            raise TypeError(f"timestamps of episode {k}: expected int64 nanoseconds, got dtype {t.dtype}")
    ids = np.arange(len(arrays), dtype=np.int64) if episode_ids is None else np.asarray(episode_ids, np.int64)
    if ids.shape != (len(arrays),):
        raise ValueError(f"episode_ids: expected {len(arrays)} ids, got {ids.shape}")
    counts = np.array([t.size for t in arrays], np.int64)
    samples = int(counts.sum())
    nonempty = counts > 0
    t = np.concatenate([a.astype(np.int64, copy=False) for a in arrays]) if samples else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(arrays) else np.zeros(0, np.int64)
    # the first and last time of each non-empty episode: span, and time of a gap from its episode's start
    first = t[starts[nonempty]]
    last = t[starts[nonempty] + counts[nonempty] - 1]
    span_s = float(np.sum(differences(last, first))) * NS
    # periods within episodes: every difference except those that cross from one episode into the next
    d = differences(t[1:], t[:-1])
    episode_of = np.repeat(np.arange(len(arrays)), counts)
    inside = episode_of[1:] == episode_of[:-1] if samples else np.zeros(0, bool)
    d, before = d[inside], np.flatnonzero(inside)  # before: index in t of the earlier sample of each period
    n_periods = int(d.size)
    negative = d < 0
    duplicates, non_monotonic = int(np.count_nonzero(d == 0)), int(np.count_nonzero(negative))
    first_bad = None
    if non_monotonic:
        i = int(before[np.argmax(negative)]) + 1
        k = int(episode_of[i])
        first_bad = (int(ids[k]), int(i - starts[k]))
    positive = d[d > 0]
    base = dict(samples=samples, episodes=len(arrays), episodes_with_samples=int(np.count_nonzero(nonempty)),
                periods=n_periods, span_s=span_s, duplicates=duplicates, non_monotonic=non_monotonic,
                first_non_monotonic=first_bad, gap_factor=float(gap_factor))
    if not positive.size:
        return StreamRates(**base, median_period_s=None, rate_hz=None, mean_rate_hz=None, jitter_std_s=None,
                           jitter_p99_s=None, gaps=0, missing_estimate=0, max_gap_s=None, max_gap_episode=None,
                           max_gap_at_ns=None, max_gap_at_s=None)
    median = float(np.median(positive))
    is_gap = d > gap_factor * median
    regular = positive[positive <= gap_factor * median]
    dev = regular - median
    jitter_std = float(np.std(dev)) * NS if dev.size else None
    jitter_p99 = float(np.percentile(np.abs(dev), JITTER_PERCENTILE)) * NS if dev.size else None
    gaps = int(np.count_nonzero(is_gap))
    gap_fields: dict[str, Any] = dict(max_gap_s=None, max_gap_episode=None, max_gap_at_ns=None, max_gap_at_s=None)
    missing = 0
    if gaps:
        gap_d = d[is_gap]
        missing = int(np.sum(np.maximum(np.rint(gap_d / median) - 1, 1)))
        j = int(np.flatnonzero(is_gap)[np.argmax(gap_d)])  # the first of the longest
        i = int(before[j])
        k = int(episode_of[i])
        gap_fields = dict(max_gap_s=float(d[j]) * NS, max_gap_episode=int(ids[k]), max_gap_at_ns=int(t[i]),
                          max_gap_at_s=(int(t[i]) - int(t[starts[k]])) * NS)
    return StreamRates(**base, median_period_s=median * NS, rate_hz=1e9 / median,
                       mean_rate_hz=positive.size / span_s if span_s > 0 else None,
                       jitter_std_s=jitter_std, jitter_p99_s=jitter_p99, gaps=gaps, missing_estimate=missing,
                       **gap_fields)


def episode_timestamps(buf: "StreamBuffer", name: str, episodes: Sequence[Any] | None = None) -> list[np.ndarray]:
    """Stream ``name``'s timestamps (int64 ns ``(N_k,)``) in each of ``episodes`` (default ``buf.episodes``,
    the open one included): one read of the stream's timestamps, cut at the episodes' spans.

    Raises:
        UnknownLeafError: ``name`` is not a stream of ``buf``.
    """
    every = buf.timestamps(name)
    eps = buf.episodes if episodes is None else episodes
    return [every[e.streams[name].start:e.streams[name].stop] for e in eps]


def stream_rates(buf: "StreamBuffer", name: str, *, gap_factor: float = GAP_FACTOR) -> StreamRates:
    """:func:`measure_rates` of stream ``name`` of a :class:`~trajstore.streams.StreamBuffer`, over its held
    episodes (the open one included, as ``buf.episodes`` lists it), named by ``StreamEpisode.id``.

    Raises:
        UnknownLeafError: ``name`` is not a stream of ``buf`` (names the streams).
    """
    eps = buf.episodes
    return measure_rates(episode_timestamps(buf, name, eps), [e.id for e in eps], gap_factor=gap_factor)


__all__ = ["StreamRates", "measure_rates", "differences", "stream_rates", "episode_timestamps", "GAP_FACTOR"]
