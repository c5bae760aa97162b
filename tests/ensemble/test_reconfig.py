"""Dynamic reconfiguration on a zkcompat ensemble, as a ZooKeeper 3.9 user meets it through
kazoo: with reconfigEnabled the established static config gets the version of the first
NEWLEADER and moves to zoo.cfg.dynamic.<version>; /zookeeper/config shows it with
ZooKeeper's Stat (version -1, mzxid the config's version); a super user removes a server
and the survivors commit with the new config, write the next dynamic file and point
zoo.cfg at it; the errors come in ZooKeeper's order (BadArguments for a config with too
few voters even from a non-super client, BadVersion for a stale config id).

Every value asserted here was read off Debian's ZooKeeper 3.8 in the same scenario, and each
test runs on an all-zkcompat ensemble and on mixed ones, each kind leading in turn."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NewConfigNoQuorumError,
    NoAuthError,
)

from .harness import FAST, Load, check_acked_everywhere, check_trees_agree, close_client
from .test_mixed import _digests_agree

# kazoo's TestReconfig harness: super:test (this is its digest).
SUPER = {"reconfigEnabled": "true",
         "DigestAuthenticationProvider.superDigest": "super:D/InIHSb7yEEbrWz8b9l71RjZJU="}
FIRST_VERSION = 0x100000000  # (epoch 1, counter 0): the first NEWLEADER's zxid
ACKS = 40


def _super_client(ensemble, sid: int) -> KazooClient:
    client = KazooClient(hosts=ensemble.address(sid), auth_data=[("digest", "super:test")])
    client.start(30)
    return client


def _lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


# All zkcompat, then mixed with ZooKeeper 3.8 each way: server.3 (the highest sid) leads.
KINDS = ["zkcompat", "zkcompat,zookeeper,zookeeper", "zookeeper,zkcompat,zkcompat"]


@pytest.fixture(params=KINDS)
def reconfig_ensemble(ensemble, request):
    ensemble.start(3, kind=request.param, settings={**FAST, **SUPER})
    ensemble.wait_one_leader()
    return ensemble


def test_static_config_gets_the_first_newleaders_version(reconfig_ensemble):
    ensemble = reconfig_ensemble
    client = ensemble.client_on(1)
    try:
        data, stat = client.get("/zookeeper/config")
    finally:
        close_client(client)
    lines = _lines(data)
    assert lines[-1] == f"version={FIRST_VERSION:x}"
    assert [line.split("=")[0] for line in lines[:-1]] == ["server.1", "server.2", "server.3"]
    assert all(line.split(";")[0].endswith(":participant") for line in lines[:-1])
    assert (stat.version, stat.mzxid, stat.czxid, stat.aversion) == (-1, FIRST_VERSION, 0, -1)
    for sid in ensemble.sids:
        cfg = ensemble.dir / f"zoo{sid}.cfg"
        dynamic = ensemble.dir / f"zoo{sid}.cfg.dynamic.{FIRST_VERSION:x}"
        assert dynamic.read_text().splitlines() == lines[:-1]
        text = cfg.read_text()
        assert f"dynamicConfigFile={dynamic}" in text
        assert "server." not in text and "clientPort=" not in text
        assert (ensemble.dir / f"zoo{sid}.cfg.bak").exists()


def test_super_removes_a_follower_and_the_rest_commit_with_the_new_config(reconfig_ensemble):
    ensemble = reconfig_ensemble
    leader = ensemble.wait_one_leader()
    gone, stays = [s for s in ensemble.sids if s != leader]
    admin = _super_client(ensemble, stays)
    try:
        data, stat = admin.reconfig(joining=None, leaving=str(gone), new_members=None)
        lines = _lines(data)
        assert [line.split("=")[0] for line in lines[:-1]] == [
            f"server.{s}" for s in sorted((leader, stays))]
        version = int(lines[-1].split("=")[1], 16)
        assert (stat.version, stat.mzxid) == (-1, version)
        assert admin.get("/zookeeper/config")[0] == data

        admin.create("/after-reconfig", b"x")  # a quorum of the new config commits it
        for sid in (leader, stays):
            client = ensemble.client_on(sid)
            try:
                client.sync("/")
                assert client.get("/zookeeper/config")[0] == data
                assert client.exists("/after-reconfig") is not None
            finally:
                close_client(client)
            dynamic = ensemble.dir / f"zoo{sid}.cfg.dynamic.{version:x}"
            assert dynamic.read_text().splitlines() == lines[:-1]
            assert f"dynamicConfigFile={dynamic}" in (
                ensemble.dir / f"zoo{sid}.cfg").read_text()
        # As in ZooKeeper, the removed server is a non-voting participant that goes on
        # following its leader until that term ends.
        assert ensemble.mode(gone) == "follower"

        with pytest.raises(BadArgumentsError):  # one voter left: "at least 2 followers"
            admin.reconfig(joining=None, leaving=str(stays), new_members=None)
        with pytest.raises(BadArgumentsError):
            admin.reconfig(joining="server.9=nonsense", leaving=None, new_members=None)
        with pytest.raises(BadVersionError):
            admin.reconfig(joining=None, leaving=str(stays), new_members=None, from_config=5)
    finally:
        close_client(admin)
    check_trees_agree(ensemble, "/", [leader, stays])


def test_only_super_reconfigures(reconfig_ensemble):
    ensemble = reconfig_ensemble
    client = ensemble.client_on(1)
    try:
        members = client.get("/zookeeper/config")[0].decode().replace("\n", ",")
        members = members.rsplit(",version=", 1)[0]
        with pytest.raises(NoAuthError):  # a valid config: the ACL is checked last
            client.reconfig(joining=None, leaving=None, new_members=members)
        with pytest.raises(BadArgumentsError):  # one voter: refused before the ACL
            client.reconfig(joining=None, leaving="1,2", new_members=None)
    finally:
        close_client(client)


@pytest.mark.parametrize("name", ["test_no_super_auth", "test_add_remove_observer",
                                  "test_bad_input"])
def test_kazoos_own_reconfig_tests(reconfig_ensemble, name):
    """kazoo's TestReconfig, its code unchanged, with its clients on this ensemble instead of
    the cluster its harness would start (super:test, as its harness configures)."""
    from kazoo.tests.test_client import TestReconfig  # kazoo.testing needs pyOpenSSL

    clients: list[KazooClient] = []

    def get_client(**kwargs) -> KazooClient:
        client = KazooClient(hosts=reconfig_ensemble.hosts(1), **kwargs)
        clients.append(client)
        return client

    case = TestReconfig(name)
    case._get_client = get_client
    case.client = get_client()
    case.client.start(30)
    try:
        getattr(case, name)()
    finally:
        for client in clients:
            close_client(client)


def test_a_server_down_during_a_reconfig_learns_it_when_it_returns(ensemble):
    """Five servers, one stopped; a reconfig leaves another out. The stopped one comes back
    with its old files: the others' election notifications carry the later config, which it
    commits before it votes, and it follows within it."""
    ensemble.start(5, settings={**FAST, **SUPER})
    leader = ensemble.wait_one_leader()
    down, gone = [s for s in ensemble.sids if s != leader][:2]
    ensemble.stop_server(down)
    admin = _super_client(ensemble, leader)
    try:
        data, _ = admin.reconfig(joining=None, leaving=str(gone), new_members=None)
        version = int(_lines(data)[-1].split("=")[1], 16)
        admin.create("/while-down", b"x")
    finally:
        close_client(admin)
    ensemble.start_server(down)
    ensemble.wait_modes(lambda m: m.get(down) == "follower", f"server.{down} follows again")
    client = ensemble.client_on(down)
    try:
        client.sync("/")
        assert client.get("/zookeeper/config")[0] == data
        assert client.exists("/while-down") is not None
    finally:
        close_client(client)
    dynamic = ensemble.dir / f"zoo{down}.cfg.dynamic.{version:x}"
    assert dynamic.read_text().splitlines() == _lines(data)[:-1]
    ensemble.wait_log(down, rf"event=election_newer_config sid=\d+ version=0x{version:x}")


def test_a_config_without_a_synced_quorum_is_refused(ensemble):
    ensemble.start(3, settings={**FAST, **SUPER})
    leader = ensemble.wait_one_leader()
    down, other = [s for s in ensemble.sids if s != leader]
    ensemble.stop_server(down)
    admin = _super_client(ensemble, leader)
    try:
        # {leader, down} as the only voters: down is not there to be synced.
        with pytest.raises(NewConfigNoQuorumError):
            admin.reconfig(joining=None, leaving=str(other), new_members=None)
        assert _lines(admin.get("/zookeeper/config")[0])[-1] == f"version={FIRST_VERSION:x}"
    finally:
        close_client(admin)


@pytest.mark.parametrize("kinds", ["zkcompat", "zookeeper,zkcompat,zkcompat"])
def test_removing_the_leader_hands_over_to_a_voter_of_the_new_config(ensemble, kinds):
    """The leader commits a config without itself: the designated voter leads the next
    term, writes go on there, and the old leader follows as a non-voting participant. Mixed:
    a zkcompat leader (server.3) removed under a ZooKeeper server.1."""
    ensemble.start(3, kind=kinds, settings={**FAST, **SUPER})
    leader = ensemble.wait_one_leader()
    admin = _super_client(ensemble, leader)
    try:
        data, _ = admin.reconfig(joining=None, leaving=str(leader), new_members=None)
    finally:
        close_client(admin)
    rest = [s for s in ensemble.sids if s != leader]
    new_leader = ensemble.wait_one_leader(up=rest)
    assert new_leader != leader
    ensemble.wait_modes(lambda m: m.get(leader) == "follower",
                        f"the old leader server.{leader} follows server.{new_leader}")
    client = ensemble.client_on(rest[0])
    try:
        client.create("/after-handover", b"x")
        for sid in ensemble.sids:
            on = ensemble.client_on(sid)
            try:
                on.sync("/")
                assert on.get("/zookeeper/config")[0] == data, f"server.{sid}"
                assert on.exists("/after-handover") is not None, f"server.{sid}"
            finally:
                close_client(on)
    finally:
        close_client(client)


ZKCLI_SCRIPT = """
config
reconfig -remove 1
reconfig -remove 1
config
reconfig -add {add1}
reconfig -v 1234 -remove 2
reconfig -members {members}
reconfig
reconfig -add server.5=nonsense
config -c
"""


def _server1_spec(ensemble) -> str:
    m1 = ensemble.member(1)
    return f"server.1=127.0.0.1:{m1.quorum_port}:{m1.election_port};127.0.0.1:{m1.client_port}"


def _side_by_side(ensemble, tmp_path, run) -> dict[str, list[str]]:
    """run(ensemble, directory) -> output lines, on a ZooKeeper 3.8 ensemble and then a
    zkcompat one (reconfig on, super:test), each server's ports put in words (Q1, E1, C1:
    they differ between the two); the two transcripts must be equal."""
    transcripts = {}
    for kind in ("zookeeper", "zkcompat"):
        directory = tmp_path / kind
        directory.mkdir()
        e = type(ensemble)(directory / "ensemble")
        try:
            e.start(3, kind=kind, settings={**FAST, **SUPER})
            e.wait_one_leader()
            words = {}
            for sid, m in e.members().items():
                words.update({str(m.quorum_port): f"Q{sid}", str(m.election_port): f"E{sid}",
                              str(m.client_port): f"C{sid}"})
            lines = []
            for line in run(e, directory):
                for port, word in words.items():
                    line = line.replace(port, word)
                lines.append(line)
            transcripts[kind] = lines
        finally:
            e.close()
    assert transcripts["zkcompat"] == transcripts["zookeeper"], "\n".join(
        difflib.unified_diff(transcripts["zookeeper"], transcripts["zkcompat"], "zookeeper",
                             "zkcompat", lineterm=""))
    return transcripts


def _zkcli_transcript(ensemble, tmp_path, shell: bool = False) -> list[str]:
    """One scripted zkCli.sh (or `zkcompat shell`) session as super against this ensemble,
    config versions put in words (they may differ between two ensembles)."""
    from conformance_tests.test_zkcli import run_zkcli
    from tests.shell.test_compare_zkcli import run_shell, transcript_39

    members = ",".join(
        f"server.{sid}=127.0.0.1:{m.quorum_port}:{m.election_port}:participant;"
        f"127.0.0.1:{m.client_port}" for sid, m in sorted(ensemble.members().items()))
    script = "addauth digest super:test\n" + ZKCLI_SCRIPT.format(add1=_server1_spec(ensemble),
                                                                 members=members)
    if shell:
        transcript, _ = run_shell(ensemble.address(3), script)
    else:
        transcript, _ = run_zkcli(ensemble.address(3), script, tmp_path)
        transcript = transcript_39(transcript)
    return [re.sub(r"version=[0-9a-f]+|^[0-9a-f]{9,} ", "version=V ", line)
            for line in transcript]


@pytest.mark.parametrize("tool", ["zkCli.sh", "zkcompat shell"])
def test_zkcli_reconfig_and_config_print_as_against_zookeeper(ensemble, tmp_path, tool):
    """zkCli.sh's config and reconfig (-add, -remove, -members, -v, and its own errors),
    the same session against a ZooKeeper 3.8 ensemble and, by zkCli.sh or by zkcompat's own
    shell, against a zkcompat one (3.8's transcript as 3.9 prints it)."""
    transcripts = _side_by_side(ensemble, tmp_path, lambda e, d: _zkcli_transcript(
        e, d, e.member(1).kind == "zkcompat" and tool == "zkcompat shell"))
    assert sum("Committed new configuration:" in line for line in transcripts["zkcompat"]) == 4


@pytest.mark.parametrize("kinds, joiner", [("zkcompat", "zkcompat"),
                                           ("zookeeper", "zkcompat"),
                                           ("zkcompat", "zookeeper")])
def test_ensemble_add_and_remove_a_server_through_reconfig(ensemble, kinds, joiner):
    """`scripts/ensemble add 4` starts server.4 as a non-voting participant that follows,
    then reconfig adds it: it votes, it has every znode, and the trees agree; `remove 4`
    takes it out again and stops it. Mixed both ways: a ZooKeeper leader adds a zkcompat
    server, a zkcompat leader a ZooKeeper one."""
    ensemble.start(3, kind=kinds, settings={**FAST, **SUPER})
    ensemble.wait_one_leader()
    client = ensemble.client_on(1)
    try:
        client.ensure_path("/before-add")
        for i in range(50):
            client.create(f"/before-add/n{i}", b"%d" % i)
    finally:
        close_client(client)
    out = ensemble.run("add", "4", "--auth", "super:test", "--kind", joiner)
    lines = [line for line in out.strip().splitlines() if line.startswith("server.")]
    assert [line.split("=")[0] for line in lines] == [f"server.{s}" for s in (1, 2, 3, 4)]
    assert ":participant;" in lines[-1]
    assert ensemble.member(4).kind == joiner
    ensemble.wait_one_leader(up=[1, 2, 3, 4])
    client = ensemble.client_on(4)
    try:
        client.create("/via-4", b"x")
        assert len(client.get_children("/before-add")) == 50
    finally:
        close_client(client)
    check_trees_agree(ensemble, "/", [1, 2, 3, 4])
    for sid in (1, 2, 3, 4):  # every learner compared its digest with the leader's: equal
        if ensemble.mode(sid) != "leader":
            _digests_agree(ensemble, sid)

    out = ensemble.run("remove", "4", "--auth", "super:test")
    assert "server.4=" not in out and "server.3=" in out
    assert 4 not in ensemble.members()
    ensemble.wait_one_leader(up=[1, 2, 3])
    check_trees_agree(ensemble, "/", [1, 2, 3])


# -- the membership bugs ZooKeeper had --------------------------------------------------


def _dynamic_files_agree(ensemble, sids) -> str:
    """ZOOKEEPER-2865: every server's zoo.cfg names a dynamic file of the same version,
    with the same server lines. Returns that text."""
    texts = {}
    for sid in sids:
        cfg = (ensemble.dir / f"zoo{sid}.cfg").read_text()
        name = re.search(r"^dynamicConfigFile=(.*)$", cfg, re.M).group(1)
        texts[sid] = (name.rsplit(".", 1)[1], Path(name).read_text())
    assert len(set(texts.values())) == 1, texts
    return next(iter(texts.values()))[1]


def test_zookeeper_3829_a_rolling_restart_that_adds_a_server_leaves_a_working_leader(
        ensemble):
    """ZOOKEEPER-3829 (with 3830, 3814, 3842), reconfig off: servers 1-3 run with config
    1,2,3; server 4 starts with 1,2,3,4; then 1, 2 and 3 restart one by one with 1,2,3,4.
    In ZooKeeper 3.5-3.6 the leader this left (server 4) could commit nothing. Here every
    server commits through whoever leads, with the new server voting."""
    ensemble.start(3, settings=FAST)
    ensemble.wait_one_leader()
    client = ensemble.client()
    try:
        client.create("/before", b"x")
    finally:
        close_client(client)
    ensemble.run("add", "4", "--static")
    m4 = ensemble.member(4)
    line = (f"server.4={m4.host}:{m4.quorum_port}:{m4.election_port};"
            f"{m4.host}:{m4.client_port}\n")
    for sid in (1, 2, 3):
        ensemble.stop_server(sid)
        with open(ensemble.dir / f"zoo{sid}.cfg", "a") as cfg:
            cfg.write(line)
        ensemble.start_server(sid)
    leader = ensemble.wait_one_leader(up=[1, 2, 3, 4])
    for sid in (1, 2, 3, 4):
        client = ensemble.client_on(sid)
        try:
            client.create(f"/after-{sid}", b"x")  # committed: the leader has a quorum
        finally:
            close_client(client)
    check_trees_agree(ensemble, "/", [1, 2, 3, 4])
    # The new server's ACK counts: with one of the old three down, the leader, server.4
    # and the last one are the quorum of four that commits.
    down = next(s for s in (1, 2, 3) if s != leader and s != 4)
    ensemble.stop_server(down)
    client = ensemble.client_on(leader)
    try:
        client.create("/three-of-four", b"x")
    finally:
        close_client(client)


def test_zookeeper_4352_a_server_added_while_the_leader_changes_has_every_write(ensemble):
    """ZOOKEEPER-4352's shape: a server joins and the ensemble re-elects around it. Server
    4 follows as a non-voting participant and is added by reconfig under load, and the
    leader is killed at once: the new leader's quorum includes the new server, which must
    hold every acknowledged write, and every server ends with the same trees and the same
    dynamic file (ZOOKEEPER-2865)."""
    ensemble.start(3, settings={**FAST, **SUPER})
    leader = ensemble.wait_one_leader()
    with Load(ensemble) as load:
        load.wait_acks(ACKS, 0, "before the add")
        ensemble.run("add", "4", "--auth", "super:test")
        killed_at = ensemble.kill(leader)
        rest = [s for s in (1, 2, 3, 4) if s != leader]
        ensemble.wait_one_leader(up=rest)
        load.wait_acks(ACKS, killed_at, "after the leader died")
    ensemble.start_server(leader)
    ensemble.wait_one_leader(up=[1, 2, 3, 4])
    check_acked_everywhere(ensemble, load.acked)
    check_trees_agree(ensemble, "/", [1, 2, 3, 4])
    text = _dynamic_files_agree(ensemble, [1, 2, 3, 4])
    assert [line.split("=")[0] for line in text.splitlines()] == [
        f"server.{s}" for s in (1, 2, 3, 4)]


def _java_admin_transcript(ensemble, classes) -> list[str]:
    import subprocess

    from tests.security.java_client import SLF4J_NOP_JAR, ZOOKEEPER_JAR

    everyone = ",".join(ensemble.address(s) for s in ensemble.sids)
    done = subprocess.run(
        ["java", "-Xshare:auto", "-XX:+UseSerialGC", "-cp",
         f"{classes}:{ZOOKEEPER_JAR}:{SLF4J_NOP_JAR}", "ReconfigAdmin", ensemble.address(1),
         everyone, _server1_spec(ensemble)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_java_zookeeper_admin_scenario_prints_as_against_zookeeper(ensemble, tmp_path):
    """The Java client's ZooKeeperAdmin (getConfig with its watch, reconfigure: remove, add
    from a version, a stale version, a whole membership, a bad one) and a client's
    updateServerList, against a ZooKeeper 3.8 ensemble and a zkcompat one."""
    import subprocess

    from tests.security.java_client import ZOOKEEPER_JAR

    classes = tmp_path / "classes"
    classes.mkdir()
    source = Path(__file__).parent / "java" / "ReconfigAdmin.java"
    done = subprocess.run(["javac", "-d", str(classes), "-cp", str(ZOOKEEPER_JAR),
                           str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    transcripts = _side_by_side(ensemble, tmp_path,
                                lambda e, d: _java_admin_transcript(e, classes))
    text = "\n".join(transcripts["zkcompat"])
    assert "watch: NodeDataChanged /zookeeper/config" in text
    assert "stale fromConfig: BADVERSION" in text
    assert "updateServerList: same session true, its ephemeral true" in text


def test_an_observer_joins_is_promoted_and_demoted(ensemble):
    """`ensemble add 4 --observer`: it observes, and reconfig makes it an observer of the
    config (INFORMANDACTIVATE); a reconfig that names it a participant makes it vote (its
    role changes: it looks again and follows); another makes it an observer again."""
    ensemble.start(3, settings={**FAST, **SUPER})
    ensemble.wait_one_leader()
    out = ensemble.run("add", "4", "--observer", "--auth", "super:test")
    assert re.search(r"^server\.4=\S+:observer;", out, re.M), out
    ensemble.wait_modes(lambda m: m.get(4) == "observer", "server.4 observes")
    m4 = ensemble.member(4)
    spec = (f"server.4={m4.host}:{m4.quorum_port}:{m4.election_port}:{{}};"
            f"{m4.host}:{m4.client_port}")
    admin = _super_client(ensemble, 1)
    try:
        data, _ = admin.reconfig(joining=spec.format("participant"), leaving=None,
                                 new_members=None)
        assert f"{spec.format('participant')}" in data.decode()
        ensemble.wait_one_leader(up=[1, 2, 3, 4])
        admin.create("/while-4-votes", b"x")
        data, _ = admin.reconfig(joining=spec.format("observer"), leaving=None,
                                 new_members=None)
        assert f"{spec.format('observer')}" in data.decode()
    finally:
        close_client(admin)
    ensemble.wait_modes(lambda m: m.get(4) == "observer", "server.4 observes again")
    ensemble.wait_one_leader(up=[1, 2, 3])
    check_trees_agree(ensemble, "/", [1, 2, 3, 4])
    _dynamic_files_agree(ensemble, [1, 2, 3, 4])


def test_an_ensemble_of_one_with_standalone_disabled_grows_again(ensemble):
    """standaloneEnabled=false: a config of one voter is allowed; the last server leads
    alone (a restart too), and servers added by reconfig make it an ensemble of three."""
    ensemble.start(3, settings={**FAST, **SUPER, "standaloneEnabled": "false"})
    leader = ensemble.wait_one_leader()
    others = [s for s in ensemble.sids if s != leader]
    for sid in others:
        ensemble.run("remove", str(sid), "--auth", "super:test")
    assert ensemble.sids == [leader]
    ensemble.stop_server(leader)
    ensemble.start_server(leader)
    ensemble.wait_modes(lambda m: m.get(leader) == "leader", f"server.{leader} leads alone")
    client = ensemble.client_on(leader)
    try:
        client.create("/alone", b"x")
        assert _lines(client.get("/zookeeper/config")[0])[0].startswith(f"server.{leader}=")
    finally:
        close_client(client)
    for sid in (4, 5):
        ensemble.run("add", str(sid), "--auth", "super:test")
    ensemble.wait_one_leader(up=[leader, 4, 5])
    check_trees_agree(ensemble, "/", [leader, 4, 5])
    text = _dynamic_files_agree(ensemble, [leader, 4, 5])
    assert len(text.splitlines()) == 3


def test_curator_reconfig_api_prints_as_against_zookeeper(ensemble, tmp_path):
    """Curator 5.4's getConfig and reconfig (leaving, joining from a version, a stale
    version, withNewMembers) against a ZooKeeper 3.8 ensemble and a zkcompat one."""
    import subprocess

    from conformance_tests.servers import CLASSPATH_JARS, JAVA_SHARE

    classpath = ":".join(str(JAVA_SHARE / jar) for jar in CLASSPATH_JARS)
    classes = tmp_path / "classes"
    classes.mkdir()
    source = Path(__file__).parent / "java" / "CuratorReconfig.java"
    done = subprocess.run(["javac", "-d", str(classes), "-cp", classpath, str(source)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    def run(e, directory) -> list[str]:
        done = subprocess.run(["java", "-Xshare:auto", "-XX:+UseSerialGC", "-cp",
                               f"{classes}:{classpath}", "CuratorReconfig",
                               ",".join(e.address(s) for s in e.sids), _server1_spec(e)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.splitlines()

    transcripts = _side_by_side(ensemble, tmp_path, run)
    assert "stale fromConfig: BADVERSION" in transcripts["zkcompat"]
    assert len(transcripts["zkcompat"]) == 5
