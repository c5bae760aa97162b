"""Session passwords, ids and the expiry queue."""

from zkcompat.server.sessions import Session, SessionTracker, initial_session_id, session_password


def test_password_is_zookeepers():
    # Passwords a real ZooKeeper 3.8 handed out for these session ids.
    assert session_password(0x100000F5CF10000).hex() == "75b6f7bb5effd60cdbfaa137d7d9def8"
    assert session_password(0x100000F5CF10001).hex() == "88d7f1bbfe4ab651d03d0963ab62f3c5"


def test_session_id_carries_server_id_on_top():
    sid = initial_session_id(1, 1_700_000_000_000)
    assert sid >> 56 == 1
    assert initial_session_id(2, 5) >> 56 == 2


def test_expiry_buckets():
    t = SessionTracker(tick_ms=100, server_id=1, now_ms=0)
    a, b = Session(1, 400), Session(2, 1000)
    t.add(a, now_ms=0)
    t.add(b, now_ms=0)
    assert t.expired(450) == []  # a's bucket is the first tick boundary after 400
    assert [s.session_id for s in t.expired(500)] == [1]
    assert a.closing
    t.touch(b, now_ms=900)  # a touch moves b's deadline
    assert t.expired(1500) == []
    assert [s.session_id for s in t.expired(2000)] == [2]
    assert t.expired(10_000) == []


def test_closing_session_is_not_touched_back_to_life():
    t = SessionTracker(tick_ms=100, server_id=1, now_ms=0)
    s = Session(1, 200)
    t.add(s, 0)
    assert t.expired(300) == [s]
    t.touch(s, 300)
    assert t.expired(10_000) == []
