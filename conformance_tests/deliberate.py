"""Where zkcompat follows ZooKeeper 3.9 on purpose and the reference binary (Debian's
ZooKeeper 3.8) answers otherwise. Each difference has a reason and a rewrite that turns
3.8's expected output into 3.9's, so the tests still compare everything else exactly and
still fail if zkcompat's 3.9 answer changes. docs/differences.md lists the same set.
"""

EXISTS_NEEDS_READ = (
    "exists() needs READ permission on an existing node in ZooKeeper 3.9.2+ (ZOOKEEPER-2590); "
    "3.8 answers it for anyone"
)
DELETE_CONTAINER_BUFFER = (
    "deleteContainer's body is a jute buffer holding the path in 3.9 (ZOOKEEPER-4575); 3.8 "
    "read the raw body as the path, so garbage there was BadArguments, now MarshallingError"
)

DIFFERENCES = {"exists-needs-read": EXISTS_NEEDS_READ,
               "delete-container-buffer": DELETE_CONTAINER_BUFFER}


def java_transcript_39(lines: list[str]) -> list[str]:
    """The Java client exercise: an unauthenticated exists() on the digest-protected node."""
    return [
        "anon exists secure -> KeeperException(NOAUTH path=$BASE/secure)"
        if line == "anon exists secure -> true" else line
        for line in lines
    ]


def zkcli_transcript_39(lines: list[str]) -> list[str]:
    """zkCli's `stat` on a node the session cannot read prints a Stat on 3.8 and
    "Insufficient permission" on 3.9 (the script's $BASE/other is digest-protected)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i] == "> stat $BASE/other":
            i += 1
            while i < len(lines) and not lines[i].startswith(">"):
                i += 1
            out.append("  Insufficient permission : $BASE/other")
            continue
        i += 1
    return out


def exists_needs_read(*labels: str):
    """For a harness scenario: the exists() calls logged under `labels`, made without READ,
    answer NoAuth on 3.9 where 3.8 returned a Stat."""

    def rewrite(log: list) -> list:
        return [(e[0], "error", "NoAuthError", -102) if e[0] in labels else e for e in log]

    return rewrite
