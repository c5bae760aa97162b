"""Deterministic simulation of an ensemble (later issue)."""
