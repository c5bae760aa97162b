"""Four-letter words: the same answers, line keys and shapes as ZooKeeper 3.8's.

Values differ between two servers (versions, counters, addresses), so most tests compare
the keys and the form of each line; the whitelist texts and ruok/isro are compared
exactly. The servers: the session `zookeeper` and `zkcompat` fixtures (whitelist "*"),
a ZooKeeper and a zkcompat whose whitelist is "ruok", and a zkcompat whose zoo.cfg does
not set 4lw.commands.whitelist at all.
"""

from __future__ import annotations

import re
import socket
import time
import uuid

import pytest
from kazoo.client import KazooClient

pytestmark = pytest.mark.timeout(90)  # the first test starts a second ZooKeeper JVM

RESTRICTED_WHITELIST = "ruok"
TICK_TIME_MS = 200
FOUR_LW_TIMEOUT_S = 5.0
TRACE_MASK = 0x1FF  # any but ZooTrace's default, 306
DEFAULT_TRACE_MASK = 306
DIGEST_LOG_INTERVAL = 128  # DataTree.DIGEST_LOG_INTERVAL

SRVR_KEYS = [
    "Zookeeper version",
    "Latency min/avg/max",
    "Received",
    "Sent",
    "Connections",
    "Outstanding",
    "Zxid",
    "Mode",
    "Node count",
]
# The form of each srvr line's value, as tools (zkServer.sh status, exporters) parse it.
SRVR_VALUE_FORMS = {
    "Zookeeper version": r"[^,]+, built on .+",
    "Latency min/avg/max": r"\d+/\d+(\.\d+)?/\d+",
    "Received": r"\d+",
    "Sent": r"\d+",
    "Connections": r"\d+",
    "Outstanding": r"\d+",
    "Zxid": r"0x[0-9a-f]+",
    "Mode": r"standalone|leader|follower|observer|read-only",
    "Node count": r"\d+",
}
# ServerCnxn.dumpConnectionInfo: brief (stat) and full (cons) for a connection with a
# session; a connection without one never shows more than the brief fields.
BRIEF_CONNECTION_KEYS = {"queued", "recved", "sent"}
FULL_CONNECTION_KEYS = BRIEF_CONNECTION_KEYS | {
    "sid", "lop", "est", "to", "lcxid", "lzxid", "lresp", "llat", "minlat", "avglat", "maxlat",
}
CONNECTION_LINE = re.compile(r"^ /(?P<addr>[^\[]+)\[(?P<ops>[0-9a-f]+)\]\((?P<fields>[^)]*)\)$")
WCHS = re.compile(r"^(\d+) connections watching (\d+) paths\nTotal watches:(\d+)\n$")
# The mntr keys of ZooKeeper's administrator guide (3.4 onwards) for a standalone server
# on Unix: the set monitoring integrations (Datadog, the Prometheus exporters) read.
MNTR_CLASSIC_KEYS = {
    "zk_version", "zk_avg_latency", "zk_max_latency", "zk_min_latency", "zk_packets_received",
    "zk_packets_sent", "zk_num_alive_connections", "zk_outstanding_requests",
    "zk_server_state", "zk_znode_count", "zk_watch_count", "zk_ephemerals_count",
    "zk_approximate_data_size", "zk_open_file_descriptor_count",
    "zk_max_file_descriptor_count",
}


def not_in_whitelist(cmd: str) -> str:
    # NIOServerCnxn.checkFourLetterWord: NopCommand(cmd + " is not executed because it
    # is not in the whitelist."), written with println.
    return f"{cmd} is not executed because it is not in the whitelist.\n"


def four_letter_word(server, cmd: str | bytes, chunks: int = 1) -> tuple[str, str]:
    """Send cmd (in `chunks` TCP writes); (reply, "ip:port" of our end of the socket)."""
    raw = cmd.encode("ascii") if isinstance(cmd, str) else cmd
    with socket.create_connection((server.host, server.port), timeout=FOUR_LW_TIMEOUT_S) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host, port = s.getsockname()[:2]
        local = f"{host}:{port}"
        step = max(1, len(raw) // chunks)
        for i in range(0, len(raw), step):
            s.sendall(raw[i : i + step])
            if chunks > 1:
                time.sleep(0.1)
        out = []
        deadline = time.monotonic() + FOUR_LW_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out.append(chunk)
    return b"".join(out).decode("utf-8", errors="replace"), local


def flw(server, cmd: str | bytes) -> str:
    return four_letter_word(server, cmd)[0]


def colon_keys(text: str) -> list[str]:
    return [line.split(":", 1)[0] for line in text.splitlines() if line]


def connection_fields(line: str) -> dict[str, str]:
    m = CONNECTION_LINE.match(line)
    assert m, f"not a connection line: {line!r}"
    return dict(f.split("=", 1) for f in m.group("fields").split(","))


def is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


@pytest.fixture(scope="module")
def zookeeper_restricted(tmp_path_factory):
    from conformance_tests.servers import start_zookeeper

    server = start_zookeeper(
        tmp_path_factory.mktemp("zookeeper-ruok"), TICK_TIME_MS,
        {"4lw.commands.whitelist": RESTRICTED_WHITELIST},
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def zkcompat_restricted(zkcompat_launcher):
    return zkcompat_launcher.start({"4lw.commands.whitelist": RESTRICTED_WHITELIST,
                                    "tickTime": TICK_TIME_MS})


@pytest.fixture(scope="module")
def zkcompat_default(zkcompat_launcher):
    """No 4lw.commands.whitelist key at all."""
    return zkcompat_launcher.start({"tickTime": TICK_TIME_MS})


@pytest.fixture(params=["zookeeper", "zkcompat"])
def server(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def kazoo_on(kazoo_factory):
    def make(server) -> KazooClient:
        return kazoo_factory(server, timeout=10.0)

    return make


# -- exact answers ----------------------------------------------------------------------


def test_ruok(server):
    assert flw(server, "ruok") == "imok"


def test_isro(server):
    assert flw(server, "isro") == "rw"


def test_unknown_word_is_read_as_a_frame_length_and_closed(zookeeper, zkcompat):
    """"xyzw" is not a 4lw: its bytes are an oversize frame length, closed silently."""
    assert flw(zookeeper, "xyzw") == ""
    assert flw(zkcompat, "xyzw") == ""


def test_word_split_across_tcp_segments(zookeeper, zkcompat):
    """NIOServerCnxn fills its 4-byte length buffer before checkFourLetterWord, however
    the bytes arrive: "ru" then "ok" is still ruok."""
    assert four_letter_word(zookeeper, "ruok", chunks=2)[0] == "imok"
    assert four_letter_word(zkcompat, "ruok", chunks=2)[0] == "imok"


def test_word_after_handshake_is_not_a_command(zookeeper, zkcompat):
    """Only the first 4 bytes of a connection may be a 4lw; later, "ruok" is a length."""

    def probe(server) -> bytes:
        connect = (b"\0" * 4 + b"\0" * 8 + (10_000).to_bytes(4, "big") + b"\0" * 8
                   + (16).to_bytes(4, "big") + b"\0" * 16 + b"\0")
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(len(connect).to_bytes(4, "big") + connect)
            time.sleep(0.5)
            s.recv(4096)  # the ConnectResponse
            s.sendall(b"ruok")
            out = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                out += chunk
            return out

    assert probe(zookeeper) == b""
    assert probe(zkcompat) == b""


# -- shapes -----------------------------------------------------------------------------


def test_srvr_lines(zookeeper, zkcompat):
    zk, ours = flw(zookeeper, "srvr"), flw(zkcompat, "srvr")
    assert colon_keys(zk) == SRVR_KEYS, zk
    assert colon_keys(ours) == SRVR_KEYS, ours
    for text in (zk, ours):
        assert text.endswith("\n")
        for line in text.splitlines():
            key, value = line.split(": ", 1)
            assert re.fullmatch(SRVR_VALUE_FORMS[key], value), line
    assert "Mode: standalone\n" in zk and "Mode: standalone\n" in ours


def test_srvr_counts_are_server_wide_totals(zookeeper, zkcompat, kazoo_on):
    """Received/Sent count every packet since start (ServerStats), including those of
    connections already gone: they only grow."""
    requests = 20

    def received(server) -> int:
        line = next(x for x in flw(server, "srvr").splitlines() if x.startswith("Received:"))
        return int(line.split(":")[1])

    for server in (zookeeper, zkcompat):
        before = received(server)
        client = kazoo_on(server)
        for _ in range(requests):
            client.exists("/")
        client.stop()
        after = received(server)
        assert after - before >= requests, (
            f"{server.kind}: Received went from {before} to {after} across {requests} "
            f"requests of a session that has since closed"
        )


def _stat_parts(text: str) -> tuple[list[str], list[str], list[str]]:
    """(header lines, client lines, srvr-like lines after the blank line)."""
    head, _, tail = text.partition("\n\n")
    lines = head.splitlines()
    assert lines[1] == "Clients:", text
    return lines[:2], lines[2:], tail.splitlines()


def test_stat_shape(zookeeper, zkcompat, kazoo_on):
    for server in (zookeeper, zkcompat):
        kazoo_on(server).exists("/")
    zk, ours = flw(zookeeper, "stat"), flw(zkcompat, "stat")
    zk_head, zk_clients, zk_tail = _stat_parts(zk)
    our_head, our_clients, our_tail = _stat_parts(ours)
    assert colon_keys(zk_head[0]) == colon_keys(our_head[0]) == ["Zookeeper version"]
    assert colon_keys("\n".join(zk_tail)) == SRVR_KEYS[1:]
    assert colon_keys("\n".join(our_tail)) == SRVR_KEYS[1:]
    assert len(zk_clients) >= 2 and len(our_clients) >= 2  # the kazoo session and us
    # stat lists each connection briefly (dumpConnectionInfo(pw, true)).
    for line in zk_clients:
        assert set(connection_fields(line)) == BRIEF_CONNECTION_KEYS, line
    for line in our_clients:
        assert set(connection_fields(line)) == BRIEF_CONNECTION_KEYS, (
            f"zkcompat stat client line {line!r}; ZooKeeper's look like {zk_clients[0]!r}"
        )


def test_cons_shape(zookeeper, zkcompat, kazoo_on):
    fields = {}
    for server in (zookeeper, zkcompat):
        client = kazoo_on(server)
        client.exists("/")
        sid = f"0x{client.client_id[0] & 0xFFFFFFFFFFFFFFFF:x}"
        text, local = four_letter_word(server, "cons")
        assert text.endswith("\n\n"), text
        lines = [line for line in text.splitlines() if line]
        parsed = [connection_fields(line) for line in lines]
        session = [f for f in parsed if f.get("sid") == sid]
        assert len(session) == 1, f"{server.kind}: no cons line with sid={sid}:\n{text}"
        own = [f for line, f in zip(lines, parsed, strict=True) if f"/{local}[" in line]
        assert len(own) == 1, f"{server.kind}: no cons line for our own {local}:\n{text}"
        fields[server.kind] = (set(session[0]), set(own[0]), text)
    zk_session, zk_own, zk_text = fields["zookeeper"]
    our_session, our_own, our_text = fields["zkcompat"]
    assert zk_session == FULL_CONNECTION_KEYS, zk_text
    assert zk_own == BRIEF_CONNECTION_KEYS, zk_text
    ours = {"with a session": our_session, "without a session": our_own}
    zks = {"with a session": zk_session, "without a session": zk_own}
    assert ours == zks, f"zkcompat:\n{our_text}ZooKeeper:\n{zk_text}"


def _mntr(server) -> dict[str, str]:
    text = flw(server, "mntr")
    rows = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        assert sep and key.startswith("zk_"), f"{server.kind}: mntr line {line!r}"
        rows[key] = value
    return rows


def test_mntr_keys_are_zookeepers(zookeeper, zkcompat):
    zk, ours = _mntr(zookeeper), _mntr(zkcompat)
    assert not set(ours) - set(zk), f"keys ZooKeeper does not have: {sorted(set(ours) - set(zk))}"
    for key, value in ours.items():
        assert is_number(value) == is_number(zk[key]), f"{key}: {value!r} vs {zk[key]!r}"
    assert ours["zk_server_state"] == zk["zk_server_state"] == "standalone"


def test_mntr_has_the_documented_keys(zookeeper, zkcompat):
    zk, ours = _mntr(zookeeper), _mntr(zkcompat)
    assert MNTR_CLASSIC_KEYS <= set(zk)
    assert MNTR_CLASSIC_KEYS <= set(ours), f"missing {sorted(MNTR_CLASSIC_KEYS - set(ours))}"


def test_conf_keys(zookeeper, zkcompat):
    def keys(server) -> list[str]:
        text = flw(server, "conf")
        lines = text.splitlines()
        assert all("=" in line for line in lines), text
        return [line.split("=", 1)[0] for line in lines]

    zk = keys(zookeeper)
    assert {"clientPort", "dataDir", "tickTime", "minSessionTimeout",
            "maxSessionTimeout"} <= set(zk)
    assert keys(zkcompat) == zk


def test_conf_values_follow_the_config(zookeeper, zkcompat):
    for server in (zookeeper, zkcompat):
        conf = dict(line.split("=", 1) for line in flw(server, "conf").splitlines())
        assert conf["clientPort"] == str(server.port)
        assert conf["tickTime"] == str(TICK_TIME_MS)
        assert conf["minSessionTimeout"] == str(2 * TICK_TIME_MS)
        assert conf["maxSessionTimeout"] == str(20 * TICK_TIME_MS)


def test_envi_keys(zookeeper, zkcompat):
    def keys(server) -> list[str]:
        text = flw(server, "envi")
        lines = text.splitlines()
        assert lines[0] == "Environment:", text
        assert all("=" in line for line in lines[1:]), text
        return [line.split("=", 1)[0] for line in lines[1:]]

    zk, ours = keys(zookeeper), keys(zkcompat)
    # java.* describe the JVM; a server without one cannot have them.
    wanted = [k for k in zk if not k.startswith("java.")]
    missing = [k for k in wanted if k not in ours]
    extra = [k for k in ours if k not in zk]
    assert not missing and not extra, f"missing {missing}, not in ZooKeeper's envi {extra}"


def _wchs(server) -> tuple[int, int, int]:
    text = flw(server, "wchs")
    m = WCHS.match(text)
    assert m, f"{server.kind}: wchs {text!r}"
    return tuple(int(g) for g in m.groups())


def test_wchs_counts_follow_watches(zookeeper, zkcompat, kazoo_on):
    """wchs summarises the data watches (DataTree.dumpWatchesSummary prints dataWatches
    only): a getData watch adds a connection, a path and a watch; a child watch is not
    counted."""
    deltas = {}
    for server in (zookeeper, zkcompat):
        path = f"/fourletter-wchs-{uuid.uuid4().hex[:8]}"
        client = kazoo_on(server)
        client.create(path, b"")
        base = _wchs(server)
        client.get(path, watch=lambda event: None)
        after_data = _wchs(server)
        client.get_children(path, watch=lambda event: None)
        after_child = _wchs(server)
        client.exists(path + "/missing", watch=lambda event: None)
        after_exists = _wchs(server)
        client.delete(path)  # fires the data and child watches
        after_fire = _wchs(server)
        deltas[server.kind] = [
            tuple(a - b for a, b in zip(after, base, strict=True))
            for after in (after_data, after_child, after_exists, after_fire)
        ]
    assert deltas["zookeeper"] == [(1, 1, 1), (1, 1, 1), (1, 2, 2), (1, 1, 1)], deltas
    assert deltas["zkcompat"] == deltas["zookeeper"]


UNSUPPORTED_ELSEWHERE = ["wchc", "wchp", "dump", "dirs", "gtmk", "crst", "srst", "reqs"]


def _other_word_shape(server, cmd: str, sid: str, path: str) -> bool:
    text = flw(server, cmd)
    if cmd == "wchc":  # session -> paths (DataTree.dumpWatches(pw, false))
        return f"{sid}\n\t{path}\n" in text
    if cmd == "wchp":  # path -> sessions
        return f"{path}\n\t{sid}\n" in text
    if cmd == "dump":
        return all(h in text for h in ("SessionTracker dump:", "ephemeral nodes dump:",
                                       "Connections dump:"))
    if cmd == "dirs":
        return re.fullmatch(r"datadir_size: \d+\nlogdir_size: \d+\n", text) is not None
    if cmd == "gtmk":
        return re.fullmatch(r"\d+", text) is not None
    if cmd == "crst":
        return text == "Connection stats reset.\n"
    if cmd == "srst":
        return text == "Server stats reset.\n"
    if cmd == "reqs":  # one line per outstanding request; none here
        return text == ""
    raise AssertionError(cmd)


@pytest.mark.parametrize("cmd", UNSUPPORTED_ELSEWHERE)
def test_other_whitelisted_words(cmd, zookeeper, zkcompat, kazoo_on):
    """The rest of ZooKeeper's 4lw, enabled by "*", answer in ZooKeeper's form."""
    shapes = {}
    for server in (zookeeper, zkcompat):
        client = kazoo_on(server)
        path = f"/fourletter-{cmd}-{uuid.uuid4().hex[:8]}"
        client.create(path, b"", ephemeral=True)
        client.get(path, watch=lambda event: None)
        sid = f"0x{client.client_id[0] & 0xFFFFFFFFFFFFFFFF:x}"
        shapes[server.kind] = _other_word_shape(server, cmd, sid, path)
    assert shapes["zookeeper"], f"ZooKeeper's {cmd} is not what this test expects"
    assert shapes["zkcompat"], f"zkcompat {cmd}: {flw(zkcompat, cmd)!r}"


def test_stmk_sets_the_trace_mask_gtmk_reads(zookeeper, zkcompat):
    """SetTraceMaskCommand: the long after "stmk" becomes the trace mask, and is printed."""
    for server in (zookeeper, zkcompat):
        answers = [flw(server, b"stmk" + TRACE_MASK.to_bytes(8, "big")), flw(server, "gtmk"),
                   flw(server, b"stmk" + DEFAULT_TRACE_MASK.to_bytes(8, "big"))]
        assert answers == [str(TRACE_MASK), str(TRACE_MASK), str(DEFAULT_TRACE_MASK)], (
            server.kind, answers)


def test_hash_lists_the_digest_log(zookeeper, zkcompat, kazoo_on):
    """DigestCommand: a `zxid: digest` line (zxid in hex) for every 128th zxid applied."""
    for server in (zookeeper, zkcompat):
        client = kazoo_on(server)
        root = f"/fourletter-hash-{uuid.uuid4().hex[:8]}"
        client.create(root)
        for _ in range(DIGEST_LOG_INTERVAL):  # one at a time: zkcompat logs only a batch's
            client.create(f"{root}/n", sequence=True)  # last zxid (node._on_applied)
        lines = flw(server, "hash").splitlines()
        assert lines, f"{server.kind}: no digest after {DIGEST_LOG_INTERVAL} txns"
        for line in lines:
            m = re.fullmatch(r"([0-9a-f]+): (-?\d+)", line)
            assert m and int(m.group(1), 16) % DIGEST_LOG_INTERVAL == 0, (server.kind, line)


# -- the whitelist ----------------------------------------------------------------------

NOT_WHITELISTED = ["stat", "mntr", "conf", "envi", "cons", "wchs", "isro", "dump", "hash"]


@pytest.mark.parametrize("cmd", NOT_WHITELISTED)
def test_word_not_in_whitelist(cmd, zookeeper_restricted, zkcompat_restricted):
    assert flw(zookeeper_restricted, cmd) == not_in_whitelist(cmd)
    assert flw(zkcompat_restricted, cmd) == not_in_whitelist(cmd)


def test_whitelisted_word_is_served(zookeeper_restricted, zkcompat_restricted):
    assert flw(zookeeper_restricted, "ruok") == "imok"
    assert flw(zkcompat_restricted, "ruok") == "imok"


def test_srvr_is_always_enabled(zookeeper_restricted, zkcompat_restricted):
    """FourLetterCommands.isEnabled adds srvr to every whitelist: zkServer.sh status
    depends on it."""
    assert colon_keys(flw(zookeeper_restricted, "srvr")) == SRVR_KEYS
    assert colon_keys(flw(zkcompat_restricted, "srvr")) == SRVR_KEYS, (
        f"zkcompat with whitelist {RESTRICTED_WHITELIST!r}: {flw(zkcompat_restricted, 'srvr')!r}"
    )


def test_default_whitelist_is_srvr_only(zkcompat_default):
    assert colon_keys(flw(zkcompat_default, "srvr")) == SRVR_KEYS
    for cmd in ("ruok", "isro", "stat", "mntr", "conf", "envi", "cons", "wchs"):
        assert flw(zkcompat_default, cmd) == not_in_whitelist(cmd)
