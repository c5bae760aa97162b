"""FencedResource and Sequencer: the resource-side check that rejects stale tokens."""

from __future__ import annotations

import threading

import pytest

from zkcompat.recipes import (
    FencedLock,
    FencedResource,
    MemoryTokenStore,
    Sequencer,
    StaleTokenError,
    WrongLockError,
    ZnodeTokenStore,
)


def test_sequencer_text_round_trip():
    sequencer = Sequencer(4294967301, "/jobs/lock", "abc__lock__0000000003")
    parsed = Sequencer.parse(str(sequencer))
    assert (parsed.token, parsed.lock_path) == (sequencer.token, sequencer.lock_path)
    with pytest.raises(ValueError):
        Sequencer.parse("17")


def test_memory_resource_rejects_lower_token_and_keeps_state():
    resource = FencedResource(lock_path="/l")
    state: list[str] = []
    resource.write("row", Sequencer(10, "/l"), lambda: state.append("a"))
    resource.write("row", Sequencer(10, "/l"), lambda: state.append("b"))  # same holder again
    resource.write("row", Sequencer(12, "/l"), lambda: state.append("c"))
    with pytest.raises(StaleTokenError) as excinfo:
        resource.write("row", Sequencer(11, "/l"), lambda: state.append("stale"))
    assert excinfo.value.highest == 12 and excinfo.value.token == 11
    assert "stale fencing token 11" in str(excinfo.value)
    resource.write("other-row", Sequencer(11, "/l"), lambda: state.append("d"))  # per object
    assert state == ["a", "b", "c", "d"]
    assert resource.highest("row") == 12


def test_resource_refuses_other_locks_and_non_tokens():
    resource = FencedResource(MemoryTokenStore(), lock_path="/a")
    with pytest.raises(WrongLockError):
        resource.check("k", Sequencer(1, "/b"))
    with pytest.raises(TypeError):
        resource.check("k", "12")  # type: ignore[arg-type]


def test_znode_store_replicas_agree(zk, make_client, base):
    replica_a = FencedResource(ZnodeTokenStore(zk, f"{base}/fence"))
    replica_b = FencedResource(ZnodeTokenStore(make_client(), f"{base}/fence"))
    replica_a.check("orders/42", 100)
    replica_b.check("orders/42", 105)
    with pytest.raises(StaleTokenError):
        replica_a.check("orders/42", 101)
    assert replica_a.highest("orders/42") == replica_b.highest("orders/42") == 105
    data, _ = zk.get(f"{base}/fence/orders%2F42")
    assert data == b"105"


def test_znode_store_concurrent_advances_keep_the_maximum(make_client, base):
    replicas = [FencedResource(ZnodeTokenStore(make_client(), f"{base}/fence")) for _ in range(4)]
    accepted: list[int] = []
    rejected: list[int] = []
    mutex = threading.Lock()

    def push(replica: FencedResource, tokens: range) -> None:
        for token in tokens:
            try:
                replica.check("k", token)
                with mutex:
                    accepted.append(token)
            except StaleTokenError:
                with mutex:
                    rejected.append(token)

    threads = [
        threading.Thread(target=push, args=(r, range(i, 200, 4))) for i, r in enumerate(replicas)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert replicas[0].highest("k") == 199 == max(accepted)
    assert len(accepted) + len(rejected) == 200


def test_lock_tokens_fence_a_resource(zk, make_client, base):
    path = f"{base}/lock"
    resource = FencedResource(lock_path=path)
    first = FencedLock(zk, path)
    old = first.acquire()
    resource.check("file", old)
    first.release()
    second = FencedLock(make_client(), path)
    new = second.acquire()
    resource.check("file", new)
    with pytest.raises(StaleTokenError):
        resource.check("file", old)
