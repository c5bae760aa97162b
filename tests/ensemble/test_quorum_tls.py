"""TLS between servers (sslQuorum, ssl.quorum.*, portUnification), alone and with Apache
ZooKeeper 3.8 in one ensemble: writes replicate over TLS election and quorum connections
and a killed leader is replaced; an ensemble moves from plaintext to TLS one restart at a
time, as ZooKeeper's docs tell operators to, without losing its quorum or a write; a
plaintext connection to a TLS-only port, and a server whose certificate names another
address, are refused with a logged reason."""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest

from tests.certs import PASSWORD, make_material

from .harness import (
    FAST,
    AckedWrites,
    check_acked_everywhere,
    check_trees_agree,
    wait_for,
    write_batch,
)

ROOT = "/tls"
WRITES_PER_MEMBER = 20
# ZooKeeper 3.8 speaks TLSv1.2 by default (3.9: TLSv1.3 alone); a mixed ensemble names one.
TLS12 = {"ssl.quorum.protocol": "TLSv1.2", "ssl.quorum.enabledProtocols": "TLSv1.2"}
ZOOKEEPER_TLS_LINE = r"(Accepted TLS connection from|SSL handshake complete with)"
ZKCOMPAT_TLS_LINE = r"event=quorum_link_tls port={port} "


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    return make_material(tmp_path_factory.mktemp("quorum-tls"))


def stores(material, party=None) -> dict[str, str]:
    party = party or material.server
    return {"ssl.quorum.keyStore.location": str(party.p12),
            "ssl.quorum.keyStore.password": PASSWORD,
            "ssl.quorum.trustStore.location": str(material.trust_jks),
            "ssl.quorum.trustStore.password": PASSWORD}


def write_through_each(ensemble, acked: AckedWrites, tag: str, sids=None) -> None:
    for sid in sids or ensemble.sids:
        paths = {f"{ROOT}/{tag}-{sid}-{i:02d}": b"%d-%d" % (sid, i)
                 for i in range(WRITES_PER_MEMBER)}
        write_batch(ensemble.client_on(sid), paths, acked, writer=f"{tag}-{sid}")


def start_and_replicate(ensemble, settings: dict, kind: str = "zkcompat"):
    """Start 3 servers, write through each, check every write is everywhere and the trees
    agree; returns (leader's sid, the acknowledged writes)."""
    ensemble.start(3, kind=kind, settings=settings)
    leader = ensemble.wait_one_leader()
    acked = AckedWrites()
    ensemble.client().ensure_path(ROOT)
    write_through_each(ensemble, acked, "first")
    check_acked_everywhere(ensemble, acked)
    check_trees_agree(ensemble, ROOT)
    return leader, acked


def fail_over_and_rejoin(ensemble, leader: int, acked: AckedWrites) -> None:
    """kill -9 the leader, write through the others once one leads, start the old leader
    again: it follows the new one and has every write."""
    survivors = [s for s in ensemble.sids if s != leader]
    ensemble.kill(leader)
    new_leader = ensemble.wait_one_leader(survivors)
    write_through_each(ensemble, acked, "after-failover", survivors)
    ensemble.start_server(leader)
    assert ensemble.wait_one_leader() == new_leader
    check_acked_everywhere(ensemble, acked)
    check_trees_agree(ensemble, ROOT)


def tls_lines(ensemble, sid: int, port: str) -> list[str]:
    pattern = (ZOOKEEPER_TLS_LINE if ensemble.member(sid).kind == "zookeeper"
               else ZKCOMPAT_TLS_LINE.format(port=port))
    return re.findall(pattern, ensemble.log_since(sid))


def set_cfg(ensemble, sid: int, settings: dict[str, str]) -> None:
    """zoo{sid}.cfg with these keys set (replaced if there), for its next start."""
    path = ensemble.dir / f"zoo{sid}.cfg"
    lines = [line for line in path.read_text().splitlines()
             if line.split("=", 1)[0] not in settings]
    lines += [f"{k}={v}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n")


def election_header(sid: int) -> bytes:
    """QuorumCnxManager's connection header (protocol version -65536, sid, address)."""
    address = b"127.0.0.1:1"
    return struct.pack(">qqi", -65536, sid, len(address)) + address


def closed_without_reply(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(election_header(99))
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True


def test_zkcompat_ensemble_over_tls(ensemble, material):
    """ZooKeeper 3.9's defaults (TLSv1.3 alone, clientAuth=need, host names verified)."""
    leader, acked = start_and_replicate(ensemble, {**FAST, "sslQuorum": "true",
                                                   **stores(material)})
    for sid in ensemble.sids:
        assert tls_lines(ensemble, sid, "election"), ensemble.log_since(sid)
        assert "protocol=TLSv1.3" in ensemble.log_since(sid)
    for sid in ensemble.sids:
        if sid != leader:
            assert tls_lines(ensemble, sid, "quorum"), ensemble.log_since(sid)

    # Plaintext on a TLS-only port: closed, one line saying why, the ensemble unharmed.
    member = ensemble.member(1)
    assert closed_without_reply(member.election_port)
    ensemble.wait_log(1, r"event=quorum_link_refused port=election .*plaintext")
    if leader != 1:
        assert closed_without_reply(ensemble.member(leader).quorum_port)
        ensemble.wait_log(leader, r"event=quorum_link_refused port=quorum .*plaintext")
    write_through_each(ensemble, acked, "after-plain", [1])
    check_trees_agree(ensemble, ROOT)


@pytest.mark.parametrize("kinds", ["zookeeper,zkcompat,zkcompat", "zkcompat,zookeeper,zookeeper"])
def test_mixed_ensemble_over_tls(ensemble, material, kinds):
    leader, acked = start_and_replicate(
        ensemble, {**FAST, "sslQuorum": "true", **TLS12, **stores(material)}, kinds)
    for sid in ensemble.sids:
        assert tls_lines(ensemble, sid, "election"), f"server.{sid}: no TLS connection logged"
    fail_over_and_rejoin(ensemble, leader, acked)  # the old leader rejoins over TLS


def test_rolling_change_to_tls_with_port_unification(ensemble, material):
    """ZooKeeper's documented steps, one server at a time, the quorum kept throughout:
    portUnification with the stores (ports take both), then sslQuorum (servers connect in
    TLS), then portUnification off (ports take TLS only)."""
    ensemble.start(3, kind="zookeeper,zkcompat,zkcompat", settings={**FAST})
    ensemble.wait_one_leader()
    acked = AckedWrites()
    ensemble.client().ensure_path(ROOT)
    steps = [("unified", {"portUnification": "true", **TLS12, **stores(material)}),
             ("tls", {"sslQuorum": "true"}),
             ("tls-only", {"portUnification": "false"})]
    for step, settings in steps:
        for sid in ensemble.sids:
            ensemble.stop_server(sid)
            set_cfg(ensemble, sid, settings)
            started = time.monotonic()
            ensemble.start_server(sid)
            wait_for(lambda sid=sid: ensemble.mode(sid) in ("leader", "follower"), 60,
                     f"server.{sid} back in the quorum after step {step}")
            write_through_each(ensemble, acked, f"{step}-{sid}")
            print(f"step {step}: server.{sid} ({ensemble.member(sid).kind}) back and written "
                  f"through in {time.monotonic() - started:.1f}s")
    check_acked_everywhere(ensemble, acked)
    check_trees_agree(ensemble, ROOT)
    for sid in ensemble.sids:  # the last restarts' connections are all TLS
        assert tls_lines(ensemble, sid, "election"), f"server.{sid}: no TLS connection logged"
    assert closed_without_reply(ensemble.member(2).election_port)


def test_certificate_that_names_another_address_is_refused(ensemble, material):
    """server.3 comes back with a certificate for 127.0.0.9 / elsewhere.example: the others
    refuse it, on the connections it opens and on those they open (ZKTrustManager's host
    check is made on both ends of a quorum connection), and the quorum of two goes on."""
    ensemble.start(3, settings={**FAST, "sslQuorum": "true", **stores(material)})
    ensemble.wait_one_leader()
    ensemble.stop_server(3)
    set_cfg(ensemble, 3, stores(material, material.misnamed))
    offsets = {sid: ensemble.log_size(sid) for sid in (1, 2)}
    with pytest.raises(AssertionError, match="did not come up"):
        ensemble.run("start-server", "3", "--timeout", "8", timeout_s=8)
    refused = r"event=quorum_link_refused port=election .*does not name 127\.0\.0\.1"
    for sid in (1, 2):  # it connects to them (they accept), they connect to it
        ensemble.wait_log(sid, refused, offsets[sid])
    acked = AckedWrites()
    ensemble.client(ensemble.hosts(1)).ensure_path(ROOT)
    write_through_each(ensemble, acked, "two", [1, 2])
    check_acked_everywhere(ensemble, acked, [1, 2])
