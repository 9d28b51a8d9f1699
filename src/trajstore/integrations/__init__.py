"""Edges of trajstore: torch datasets, gymnasium recording, simulator tasks, LeRobot v3.0 import,
a Ray Data datasource.

Each module imports its optional dependency (torch, gymnasium, gym-pusht, pyarrow, av, ray) lazily.
"""
