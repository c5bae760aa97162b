"""The server-to-server entry points under bad bytes: a zkcompat ensemble with quorum TLS,
port unification and quorum SASL (required of learners, not by servers, so bytes that
do not authenticate go on to the header and frame parsers) takes seeded random bytes,
fake TLS records, headers with garbage after them and auth packets with garbage inside
on every election port and the leader's quorum port. Every server stays up with no
traceback in its log, the quorum keeps its leader, and writes through each member agree."""

from __future__ import annotations

import random
import socket
import struct

from tests.certs import make_material

from .harness import FAST, AckedWrites, check_acked_everywhere, check_trees_agree
from .test_quorum_sasl import use_jaas
from .test_quorum_tls import ROOT, stores, write_through_each

SEED = 2026
CASES = 40
PROTOCOL_VERSION = -65536  # QuorumCnxManager's header
MAGIC = struct.pack(">q", 0x5F2435013501EDCC)  # QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER
SETTINGS = {"sslQuorum": "true", "portUnification": "true",
            "quorum.auth.enableSasl": "true", "quorum.auth.learnerRequireSasl": "true"}


def header(sid: int, address: bytes = b"127.0.0.1:1") -> bytes:
    return struct.pack(">qqi", PROTOCOL_VERSION, sid, len(address)) + address


def payloads(rng: random.Random) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(CASES):
        garbage = rng.randbytes(rng.randrange(1, 300))
        out += [
            garbage,
            bytes([22, 3, rng.randrange(4)]) + struct.pack(">H", len(garbage)) + garbage,
            header(rng.choice([0, 1, 2, 3, 99, -1, 2**62])) + garbage,
            header(99) + MAGIC + garbage,
            header(99) + MAGIC + struct.pack(">ii", rng.choice([0, 1, -1, 7]),
                                             rng.choice([-5, 0, 10**9, len(garbage)])) + garbage,
            MAGIC + garbage,  # the quorum port's auth packet
            struct.pack(">iq", 11, rng.getrandbits(63)) + garbage,  # a broken FOLLOWERINFO
        ]
    return out


def throw(port: int, data: bytes) -> None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(data)
            sock.settimeout(0.05)
            try:
                sock.recv(4096)
            except OSError:
                pass
    except OSError:
        pass  # refused or reset: the server's right


def test_election_and_quorum_ports_survive_bad_bytes(ensemble, monkeypatch, tmp_path,
                                                     tmp_path_factory):
    material = make_material(tmp_path_factory.mktemp("fuzz-tls"))
    use_jaas(monkeypatch, tmp_path, "good")
    ensemble.start(3, settings={**FAST, **SETTINGS, **stores(material)})
    leader = ensemble.wait_one_leader()
    acked = AckedWrites()
    ensemble.client().ensure_path(ROOT)
    rng = random.Random(SEED)
    cases = payloads(rng)
    for i, data in enumerate(cases):
        member = ensemble.member(ensemble.sids[i % 3])
        throw(member.election_port, data)
        throw(ensemble.member(leader).quorum_port, data)
    assert ensemble.wait_one_leader() == leader
    write_through_each(ensemble, acked, "after-fuzz")
    check_acked_everywhere(ensemble, acked)
    check_trees_agree(ensemble, ROOT)
    for sid in ensemble.sids:
        assert ensemble.running(sid)
        log = ensemble.log_since(sid)
        assert "Traceback" not in log, log[log.index("Traceback") - 1500:][:5000]
        assert "event=quorum_link_refused" in log  # the fake TLS records
    print(f"\n{len(cases)} payloads to each kind of port; leader server.{leader} kept")
