"""From the demo to a policy: behaviour cloning on the successful PushT demonstrations of a buffer.

Record the demo first (``trajstore record --env pusht --out demo-out/pusht``, or ``make demo``), then::

    python examples/train_policy.py --buffer demo-out/pusht            # about a minute on a CPU
    python examples/train_policy.py --buffer demo-out/pusht --rollouts 5

What it shows, in trajstore's terms:

- the episodes to learn from are chosen by a selection over the episode data, as ``trajstore copy
  --episodes`` takes it (default ``"success == true"``: the demonstrations that reached the goal);
- :class:`~trajstore.training.torch.ReplayBufferDataset` serves those episodes' steps to a torch
  ``DataLoader``, camera frames as ``(3, 96, 96)`` float32 in ``[0, 1]``;
- the dataset's :class:`~trajstore.training.normalizer.Normalizer` (the buffer's ``stats()``) normalises
  the inputs and the action for training and un-normalises the predicted action for a rollout.

The model is tiny on purpose: a 3-layer CNN over the 96x96 frame plus the agent position, predicting
the (x, y) target of the next step (px) with a mean squared error on the normalised action. It learns
to move toward the block, but with this budget (one minute, ten demonstrations, no action chunks or
diffusion) it does not solve PushT: ``--rollouts N`` reports how many of N episodes it solves, and
expect that number to be 0. A policy that solves PushT needs the same data loop with a larger model,
action chunks and hours of training (e.g. Diffusion Policy).

Prints the loss at the first and the last step, and writes ``--out``: ``{"model": state_dict,
"config": {...}}`` (``torch.save``; load it with ``torch.load(path, weights_only=True)``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_query import parse_selection
from trajstore.training.torch import ReplayBufferDataset

PIXELS, AGENT_POS, ACTION = ("observation", "pixels"), ("observation", "agent_pos"), ("action",)


class TinyPolicy(nn.Module):
    """(B, 3, 96, 96) float frames and (B, 2) normalised agent positions -> (B, 2) normalised actions."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.vision = nn.Sequential(
            nn.Conv2d(3, width, 5, stride=2, padding=2), nn.ReLU(),       # 48x48
            nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU(),   # 24x24
            nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU(),   # 12x12
            nn.AdaptiveAvgPool2d(4), nn.Flatten())                        # width * 16
        self.head = nn.Sequential(nn.Linear(width * 16 + 2, 256), nn.ReLU(), nn.Linear(256, 2))

    def forward(self, pixels: torch.Tensor, agent_pos: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.vision(pixels), agent_pos], dim=1))


def _leaf(batch: dict, path: tuple[str, ...]) -> torch.Tensor:
    for key in path:
        batch = batch[key]
    return batch.float()


def _forever(loader: DataLoader):
    while True:
        yield from loader


def train(args: argparse.Namespace) -> tuple[TinyPolicy, ReplayBufferDataset, list[float]]:
    rb = ReplayBuffer.load_from(args.buffer, read_only=True)
    episodes = parse_selection(args.episodes).select(rb.episodes)
    if not episodes:
        sys.exit(f"no episode of {args.buffer} matches --episodes {args.episodes!r} (of {rb.num_episodes}); "
                 "record more (trajstore record --env pusht) or give another selection, e.g. 'steps >= 1'")
    dataset = ReplayBufferDataset(rb, episodes=episodes, image_layout="CHW", image_dtype="float32")
    norm = dataset.normalizer()
    print(f"training on {len(episodes)} of {rb.num_episodes} episodes ({args.episodes}): {len(dataset)} steps")
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=len(dataset) > args.batch_size)
    torch.manual_seed(args.seed)
    model = TinyPolicy()
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    losses: list[float] = []
    start = time.perf_counter()
    for step, batch in zip(range(args.steps), _forever(loader)):
        batch = norm.normalize(batch)
        prediction = model(_leaf(batch, PIXELS), _leaf(batch, AGENT_POS))
        loss = nn.functional.mse_loss(prediction, _leaf(batch, ACTION))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        if step == 0 or step == args.steps - 1 or (step + 1) % max(1, args.steps // 10) == 0:
            print(f"step {step + 1:5d}/{args.steps}  loss {losses[-1]:.4f}  ({time.perf_counter() - start:.0f} s)")
    return model, dataset, losses


@torch.no_grad()
def rollouts(model: TinyPolicy, dataset: ReplayBufferDataset, n: int, seed: int) -> int:
    """Run ``n`` PushT episodes (seeds ``seed``, ``seed + 1``, ...) under ``model``; how many succeeded."""
    from trajstore.recording import pusht

    norm = dataset.normalizer()
    env = pusht.make_recording_env()
    model.eval()
    successes = 0
    for k in range(n):
        obs, info = env.reset(seed=seed + k)
        done, steps = False, 0
        while not done:
            frame = torch.from_numpy(np.ascontiguousarray(obs["pixels"].transpose(2, 0, 1))).float()[None] / 255.0
            batch = norm.normalize({"observation": {"pixels": frame,
                                                    "agent_pos": torch.from_numpy(obs["agent_pos"])[None]}})
            action = model(_leaf(batch, PIXELS), _leaf(batch, AGENT_POS))
            action = norm.unnormalize({"action": action})["action"][0].numpy().astype(np.float32)
            obs, _, terminated, truncated, info = env.step(np.clip(action, 0.0, pusht.WORKSPACE))
            done, steps = terminated or truncated, steps + 1
        successes += bool(info["is_success"])
        print(f"rollout {k}: {'succeeded' if info['is_success'] else 'failed'} after {steps} steps "
              f"(coverage {info['coverage']:.2f})")
    env.close()
    return successes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffer", default="demo-out/pusht", help="the PushT buffer folder (default %(default)s)")
    parser.add_argument("--episodes", default="success == true",
                        help="episode selection to learn from (default %(default)r)")
    parser.add_argument("--steps", type=int, default=600, help="gradient steps (default %(default)s, ~1 min on CPU)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="demo-out/bc_policy.pt", help="checkpoint to write (default %(default)s)")
    parser.add_argument("--rollouts", type=int, default=0, help="evaluate in N PushT episodes (default none)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be >= 1")

    model, dataset, losses = train(args)
    if not all(math.isfinite(x) for x in losses):
        sys.exit(f"the loss diverged: {losses[-5:]}")
    print(f"loss: {losses[0]:.4f} at the first step, {losses[-1]:.4f} at the last")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(),
                "config": {"buffer": str(args.buffer), "episodes": args.episodes, "steps": args.steps,
                           "final_loss": losses[-1]}}, out)
    print(f"wrote {out}")
    if args.rollouts:
        # Fresh seeds, not the demonstrations' own (the demo records seeds 0, 1, ...).
        won = rollouts(model, dataset, args.rollouts, seed=1000 + args.seed)
        print(f"{won}/{args.rollouts} rollouts succeeded (this tiny policy is not expected to solve PushT)")


if __name__ == "__main__":
    main()
