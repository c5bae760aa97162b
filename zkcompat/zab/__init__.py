"""Atomic broadcast: sans-I/O peer state machines plus the asyncio transport."""
