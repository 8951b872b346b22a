"""Validation rules of the simulated API server (used by simcluster.admission)."""
