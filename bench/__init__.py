"""Benchmarks: zkcompat and Apache ZooKeeper side by side in one run, on raw sockets.

Pieces, each replaceable on its own: `servers` (start/stop/RSS of a managed server, or an
external connect string), `wire` (sessions and requests through zkcompat.jute),
`workloads` (what each session sends), `loadgen` (closed-loop client processes),
`scenarios` (a measurement: write throughput, recovery), `sessions` (many sessions:
watch fan-out, idle pings, held sessions), `scale` (the scale checks), `report` (the table).

Outside the zkcompat package, which never imports it: it starts Apache ZooKeeper too, and is
not installed. scripts/bench runs it from the repository's root as `python -m bench`.
"""
