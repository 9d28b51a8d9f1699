"""Run a policy for a number of episodes through :class:`RecordEpisodes`, with a progress bar, and
stop cleanly on Ctrl-C.

Ctrl-C (SIGINT, when recording in the main thread and no other handler was installed) does not
break into a buffer call: it is noted, the step under way finishes, and the loop stops there. A
second Ctrl-C raises at once. Either way, and for a ``KeyboardInterrupt`` raised by the policy or
the env, the episode being recorded is *discarded* (its steps are dropped from the buffer, see
:meth:`~trajstore.replay_buffer.ReplayBuffer.discard_episode`), so the folder holds whole episodes
only, and :class:`RecordingInterrupted` (a ``KeyboardInterrupt``) is raised with the summary of
what was kept. Any other error also discards the open episode before it propagates.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from trajstore._text import count as _count

if TYPE_CHECKING:
    from trajstore.recording.episodes import RecordEpisodes

#: ``policy(observation, info) -> action``, with the env's observation and info.
Policy = Callable[[Any, dict], Any]
#: ``policy(observation, info, rng) -> action``: a policy that draws its noise from ``rng``.
SeededPolicy = Callable[[Any, dict, "np.random.Generator"], Any]


@dataclass
class RecordingSummary:
    """What a recording run kept.

    Attributes:
        path: the buffer folder (None in memory).
        episodes, steps: episodes ended by this run and their steps.
        discarded_steps: steps of the episode that was open when the run stopped (dropped).
        interrupted: the run was stopped (Ctrl-C) before all episodes were recorded.
        held_episodes, held_steps: what the buffer holds now (earlier runs included; a ring may
            have overwritten some).
        successes: episodes of this run whose episode data says ``success`` (or ``is_success``) is
            true, as :class:`~trajstore.recording.episodes.RecordEpisodes` stores the env's
            ``info["is_success"]``; None when no episode of the run has either entry.
    """

    path: str | None
    episodes: int = 0
    steps: int = 0
    discarded_steps: int = 0
    interrupted: bool = False
    held_episodes: int = 0
    held_steps: int = 0
    successes: int | None = None

    def line(self) -> str:
        """One line for a terminal, e.g. ``recorded 10 episodes (1695 steps) in demo-out/pusht; 10/10 succeeded``
        or ``interrupted: kept 3 episodes (150 steps) in data/x; discarded the open episode ...``."""
        text = (f"{'interrupted: kept' if self.interrupted else 'recorded'} {_count(self.episodes, 'episode')} "
                f"({self.steps} steps) in {self.path}")
        if self.successes is not None:
            text += f"; {self.successes}/{self.episodes} succeeded"
        if self.interrupted:
            text += f"; discarded the open episode ({self.discarded_steps} steps)"
        if (self.held_episodes, self.held_steps) != (self.episodes, self.steps):
            text += f"; the buffer holds {_count(self.held_episodes, 'episode')} ({self.held_steps} steps)"
        return text


class RecordingInterrupted(KeyboardInterrupt):
    """Recording was stopped by Ctrl-C; :attr:`summary` says what was kept (the buffer is consistent)."""

    def __init__(self, summary: RecordingSummary):
        super().__init__(summary.line())
        self.summary = summary


def run_episodes(env: "RecordEpisodes", policy: Policy, seeds: Sequence[int], *, progress: bool = True,
                 desc: str = "recording", on_step: Callable[[dict], None] | None = None) -> RecordingSummary:
    """Record ``len(seeds)`` episodes: episode ``k`` resets ``env`` with ``seeds[k]``, seeds its
    ``action_space`` with it too, then steps ``policy`` until the env terminates or truncates
    (a cap on steps is the env's job: ``gymnasium.make(..., max_episode_steps=N)``).

    Args:
        env: the recording wrapper; the caller closes it (and the buffer).
        on_step: called with ``env.last_step`` after each step (e.g. to keep a reference copy).

    Returns:
        The summary; the buffer holds every episode of it, ended and flushed.

    Raises:
        RecordingInterrupted: Ctrl-C (or a ``KeyboardInterrupt`` from the policy or env); the open
            episode was discarded, the finished ones are kept.
        Any error of the env, the policy or the buffer, after the open episode was discarded.
    """
    from tqdm import tqdm

    summary = RecordingSummary(path=None)
    with _sigint_between_steps() as stop, tqdm(total=len(seeds), unit="episode", disable=not progress,
                                                desc=desc) as bar:
        try:
            for seed in seeds:
                obs, info = env.reset(seed=int(seed))
                env.action_space.seed(int(seed))
                steps = 0
                while True:
                    if stop.requested:
                        raise KeyboardInterrupt
                    obs, _, terminated, truncated, info = env.step(policy(obs, info))
                    steps += 1
                    if on_step is not None:
                        on_step(env.last_step)  # type: ignore[arg-type]
                    if terminated or truncated:
                        break
                summary.episodes += 1
                summary.steps += steps
                success = _success(env)
                if success is not None:
                    summary.successes = (summary.successes or 0) + int(success)
                bar.set_postfix(steps=summary.steps)
                bar.update()
        except KeyboardInterrupt:
            summary.discarded_steps = env.discard_episode()
            summary.interrupted = True
        except BaseException:
            env.discard_episode()
            raise
    summary.path = None if env.recorder.path is None else str(env.recorder.path)
    if env.buffer is not None:
        summary.held_episodes, summary.held_steps = env.buffer.num_episodes, len(env.buffer)
    if summary.interrupted:
        raise RecordingInterrupted(summary)
    return summary


def _success(env: "RecordEpisodes") -> bool | None:
    """Whether the episode ``env`` just ended succeeded, by its episode data (None: it does not say)."""
    if env.buffer is None:
        return None
    data = env.buffer.episode(-1).data
    value = data.get("success", data.get("is_success"))
    return None if value is None else bool(value)


class _StopRequest:
    requested = False


@contextmanager
def _sigint_between_steps() -> Iterator[_StopRequest]:
    """While recording, the first SIGINT sets ``requested`` (the loop stops after the current step)
    and restores the previous handler, so that a second one raises ``KeyboardInterrupt`` at once.

    Only in the main thread and when Python's default handler is installed; otherwise SIGINT is
    left alone (it raises ``KeyboardInterrupt`` wherever it lands, which the loop handles too).
    """
    stop = _StopRequest()
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        stop.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.stderr.write("\nstopping after this step (Ctrl-C again to stop at once)\n")

    signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)



def run_episode(env: Any, policy: SeededPolicy, *, seed: int, rng: np.random.Generator,
                observation: Callable[[Any], Any] = lambda o: o, max_steps: int | None = None) -> Iterator[dict]:
    """Yield the steps of one episode of ``env`` (reset with ``seed``) under ``policy``, without a buffer.

    Each step is ``{"observation": o_t, "action": a_t, "reward": float32 r_{t+1}, "terminated": bool,
    "truncated": bool}``, a value of :func:`~trajstore.recording.step.step_space`. ``observation`` maps
    the env's observation to the recorded one (e.g. dtype casts). The episode ends when the env
    terminates or truncates, or after ``max_steps`` steps (the last step is then marked truncated).
    """
    obs, info = env.reset(seed=seed)
    t = 0
    while True:
        action = policy(obs, info, rng)
        next_obs, reward, terminated, truncated, info = env.step(action)
        t += 1
        truncated = bool(truncated) or (max_steps is not None and t >= max_steps and not terminated)
        yield {"observation": observation(obs), "action": action, "reward": np.float32(reward),
               "terminated": bool(terminated), "truncated": truncated}
        if terminated or truncated:
            return
        obs = next_obs
