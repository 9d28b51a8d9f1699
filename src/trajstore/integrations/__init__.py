"""Edges of trajstore: torch datasets, gymnasium recording, simulator tasks.

Each module imports its optional dependency (torch, gymnasium, gym-pusht) lazily.
"""
