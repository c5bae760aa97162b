"""The `zkcompat` command (cli/main.py registers every subcommand) and the container image's
entrypoint and health check (cli/container.py).

Empty on purpose: `python -m zkcompat.cli.container ruok` runs every 10 s in a container and
imports nothing but what it needs.
"""
