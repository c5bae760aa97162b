"""Deterministic simulation of an ensemble (later issue).

history            client history records (invoked, completed or unknown, result)
linearizability    the checker every simulated run's history goes through
"""
