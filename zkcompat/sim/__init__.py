"""Deterministic simulation of a whole ensemble on one thread, from one seed: the real
QuorumPeer, each role's chain of stages and Connection on a virtual clock, with simulated
disk and network.

loop               the virtual-clock event loop (time jumps to the next timer)
network            byte streams between nodes: delay, partitions, resets
disk               the production TxnLog over an in-memory store and a virtual-clock
                   writer: unsynced appends die in a crash
bugs               injected bugs, as subclasses of the zab roles
server             one simulated member: the real QuorumPeer over simulated parts
cluster            N servers, clients and the nemesis for one seed; run_seed
clients            kazoo-like sessions on the client wire, recording a history
nemesis            the seeded fault plan: crashes, partitions, power loss, slow disks,
                   pauses, clock jumps, failed fsyncs
checks             after a run: linearizability, replica agreement, one leader per
                   epoch, acknowledged writes kept, per-session order, watches, locks
watchlog           what each connection saw of one-shot watches; the watch guarantees' check
locks              the lock recipe's records; checks of its tokens and fenced writes
history            client history records (invoked, completed or unknown, result)
linearizability    the Wing & Gong / Porcupine checker, partitioned per znode: its model
                   (lin_model), partitions (lin_partition), search (lin_search) and
                   report (lin_report)
cli                `zkcompat sim --seeds N --servers 3|5|7 [--seed S --trace]`
"""
