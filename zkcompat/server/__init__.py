"""The client-facing pipeline: connection, sessions, prep, apply, watches, admin."""
