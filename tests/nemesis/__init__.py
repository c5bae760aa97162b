"""The nemesis: partitions between the servers of a real 3-server ensemble (nftables rules
on 127.0.0.1-3), under clients whose history is checked for linearizability, session order,
unique sequential names, lost writes and replicas that disagree (issue 28, first slice)."""
