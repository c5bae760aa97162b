"""The watch and lock checks on hand-made histories: each passes a good one and fails a
bad one, so neither can pass vacuously; and a whole run feeds them real records."""

from zkcompat.jute.constants import EventType
from zkcompat.sim.cluster import run_seed
from zkcompat.sim.locks import Acquired, Fenced, check_acquisitions, check_fencing, sequence_of
from zkcompat.sim.watchlog import Event, Seen, WatchSet, check_watches

P = "/w/k0"
CHANGED = EventType.NODE_DATA_CHANGED


# -- watches --------------------------------------------------------------------------


def test_event_before_the_new_data_passes():
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 3), 1, True),
           Event(1, P, CHANGED), Seen(1, P, (True, 4))]
    assert check_watches(log) == []


def test_new_data_before_the_event_fails():
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 3), 1, True),
           Seen(1, P, (True, 4)), Event(1, P, CHANGED)]
    failures = check_watches(log)
    assert len(failures) == 1 and "before the event" in failures[0]


def test_a_deletion_seen_before_the_event_fails():
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 0), 1, True), Seen(1, P, (False, None))]
    assert check_watches(log)


def test_a_reply_that_does_not_say_the_version_is_no_change():
    # create -> NODEEXISTS says only that the znode exists.
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 3), 1, True), Seen(1, P, (True, None))]
    assert check_watches(log) == []


def test_the_same_state_on_another_connection_is_not_this_watch():
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 3), 1, True), Seen(2, P, (True, 4))]
    assert check_watches(log) == []


def test_a_one_shot_watch_that_fires_twice_fails():
    log = [WatchSet(1, 1, P), Seen(1, P, (True, 3), 1, True),
           Event(1, P, CHANGED), Event(1, P, CHANGED)]
    failures = check_watches(log)
    assert len(failures) == 1 and "fired twice" in failures[0]


def test_an_event_without_any_watch_fails():
    assert check_watches([Event(1, P, CHANGED)])


def test_a_getdata_on_a_missing_znode_arms_nothing():
    log = [WatchSet(1, 1, P), Seen(1, P, (False, None), 1, False), Event(1, P, CHANGED)]
    assert check_watches(log)


def test_a_read_answered_after_the_event_arms_a_new_watch():
    # Two watch-setting reads in flight; the first registers, the change fires it, the
    # second was read after the change and registers again: two events are right.
    log = [WatchSet(1, 1, P), WatchSet(1, 2, P), Seen(1, P, (True, 3), 1, True),
           Event(1, P, CHANGED), Seen(1, P, (True, 4), 2, True), Event(1, P, CHANGED)]
    assert check_watches(log) == []


def test_two_registrations_before_one_change_allow_one_event_only():
    log = [WatchSet(1, 1, P), WatchSet(1, 2, P), Seen(1, P, (True, 3), 1, True),
           Seen(1, P, (True, 3), 2, True), Event(1, P, CHANGED), Event(1, P, CHANGED)]
    assert check_watches(log)


# -- locks ----------------------------------------------------------------------------


def test_sequence_numbers_come_from_the_last_ten_digits():
    assert sequence_of("c3.12-0000000042") == 42


def test_tokens_rising_with_the_zxid_they_were_read_at_pass():
    acquired = [Acquired(1, 0xA, 5, 0x100000010), Acquired(2, 0xB, 7, 0x100000020),
                Acquired(1, 0xA, 5, 0x100000011),  # the same holder seeing it again
                Acquired(3, 0xC, 9, 0x200000003)]
    assert check_acquisitions(acquired) == []


def test_a_lower_token_lowest_after_a_higher_one_fails():
    # Token 5's node existed (it was lowest) after token 7 had been lowest: two holders.
    acquired = [Acquired(2, 0xB, 7, 0x100000020), Acquired(1, 0xA, 5, 0x100000030)]
    failures = check_acquisitions(acquired)
    assert len(failures) == 1 and "two nodes" in failures[0]


def test_two_tokens_lowest_in_one_state_fail():
    acquired = [Acquired(1, 0xA, 5, 0x100000020), Acquired(2, 0xB, 7, 0x100000020)]
    assert check_acquisitions(acquired)


def test_fenced_writes_with_non_decreasing_tokens_pass():
    fenced = [Fenced(1, 0xA, 5, 0x10), Fenced(1, 0xA, 5, 0x12), Fenced(2, 0xB, 7, 0x15)]
    assert check_fencing(fenced) == []


def test_a_fenced_write_with_a_lower_token_after_a_higher_one_fails():
    # An expired holder still believing it holds the lock is fine; its write committing
    # after the next holder's is not: the fence did not hold.
    fenced = [Fenced(1, 0xA, 5, 0x10), Fenced(2, 0xB, 7, 0x15), Fenced(1, 0xA, 5, 0x18)]
    failures = check_fencing(fenced)
    assert len(failures) == 1 and "went back" in failures[0]


def test_a_run_records_watches_locks_and_fenced_writes():
    result = run_seed(1, 3, profile="none", duration_s=8.0)
    assert result.ok, result.failures
    assert result.stats["watch_events"] > 5
    # The lock changes hands often (an attempt under way steps every batch): 12 here.
    assert result.stats["locks"] >= 8
    assert result.stats["fenced"] >= 3 * 8
