"""Differential scenarios: how Kafka (ZooKeeper mode, KafkaZkClient) uses ZooKeeper.

The requests are the ones Kafka's ZooKeeperClient sends, on the wire:

- broker registration: multi(create /brokers/ids/N EPHEMERAL with null data,
  setData /brokers/ids/N <json> version 0); the broker epoch is the czxid in
  the setData result's Stat (KafkaZkClient.registerBroker / CheckedEphemeral);
- controller election through an ephemeral /controller: the loser gets
  NodeExists and watches the node with exists; when the winner's session
  ends the watch fires and the next candidate wins;
- getChildren2 with a watch on /brokers/ids (ZooKeeperClient uses the
  Children2Callback API, i.e. op 12), re-armed after every event;
- controller writes fenced by the controller epoch's zkVersion: multi(check
  /controller_epoch version, setData/create ...) fails with BadVersion and
  applies nothing when another controller has moved the epoch on.

Fixed JSON timestamps keep both servers' logs comparable; zxids are compared
by rank (the harness), and the facts the pattern relies on (epochs grow, the
fenced write changed nothing) are also checked against the reference itself.
"""

from __future__ import annotations

import json

from .harness import Zxid, scenario
from .rawclient import int32
from .test_scenarios_api39 import (
    EPHEMERAL,
    OP_CHECK,
    OP_CREATE,
    OP_SET_DATA,
    Api,
    create_payload,
    expect,
    set_data_payload,
    ustring,
)

BROKER_TIMESTAMP = "1700000000000"


def broker_json(broker_id: int, port: int) -> bytes:
    """The registration KafkaZkClient writes (BrokerInfo.toJsonBytes, version 5)."""
    return json.dumps(
        {
            "features": {},
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://broker{broker_id}:{port}"],
            "jmx_port": -1,
            "port": port,
            "host": f"broker{broker_id}",
            "version": 5,
            "timestamp": BROKER_TIMESTAMP,
        },
        separators=(",", ":"),
    ).encode()


def controller_json(broker_id: int) -> bytes:
    return json.dumps(
        {"version": 1, "brokerid": broker_id, "timestamp": BROKER_TIMESTAMP},
        separators=(",", ":"),
    ).encode()


def register_broker(api: Api, label: str, ids_path: str, broker_id: int) -> int | None:
    """KafkaZkClient.registerBroker: the checked ephemeral create as one multi.
    Returns the broker epoch (the ephemeral's czxid) or None."""
    path = f"{ids_path}/{broker_id}"
    result = api.multi(
        label,
        [
            (OP_CREATE, create_payload(path, None, EPHEMERAL)),
            (OP_SET_DATA, set_data_payload(path, broker_json(broker_id, 9090 + broker_id), 0)),
        ],
    )
    if result is None or result.err != 0 or not result.value:
        return None
    last = result.value[-1]
    if last[0] != OP_SET_DATA or last[1] != "ok":
        return None
    return last[2].czxid


def kafka_tree(zk, base: str) -> str:
    """The persistent paths Kafka creates at startup (KafkaZkClient.createTopLevelPaths)."""
    for path in (
        "brokers/ids",
        "brokers/topics",
        "config/changes",
        "admin/delete_topics",
        "isr_change_notification",
    ):
        zk.ensure_path(f"{base}/{path}")
    return f"{base}/brokers/ids"


@scenario
def kafka_broker_registration(env):
    """Broker registration as one multi; the epoch is the ephemeral's czxid, the
    same in the setData result and a later exists, and it grows when the broker
    registers again on a new session. A second live broker with the same id
    gets NodeExists and changes nothing."""
    admin = env.client()
    ids = kafka_tree(admin, env.base)
    broker = Api(env, "broker 1")
    epoch1 = register_broker(broker, "register broker 1", ids, 1)
    expect(env, epoch1 is not None, "registration multi succeeded")
    env.record("broker epoch", Zxid(epoch1 or 0))
    stat = broker.exists("exists /brokers/ids/1", f"{ids}/1")
    expect(env, stat is not None and stat.value.czxid == epoch1, "exists shows the epoch as czxid")
    env.call("controller reads registration", admin.get, f"{ids}/1")
    impostor = Api(env, "impostor")
    register_broker(impostor, "same id from another session", ids, 1)
    env.call("registration unchanged", admin.get, f"{ids}/1")
    broker.rc.close_session()
    env.call("gone with the session", admin.exists, f"{ids}/1")
    again = Api(env, "broker 1 restarted")
    epoch2 = register_broker(again, "register broker 1 again", ids, 1)
    env.record("broker epoch after restart", Zxid(epoch2 or 0))
    expect(env, epoch1 is not None and epoch2 is not None and epoch2 > epoch1, "the epoch grew")
    other = Api(env, "broker 2")
    epoch3 = register_broker(other, "register broker 2", ids, 2)
    expect(
        env,
        epoch3 is not None and epoch2 is not None and epoch3 > epoch2,
        "later brokers, later epochs",
    )
    env.call("children", admin.get_children, ids)


@scenario
def kafka_broker_ids_watch(env):
    """The controller's getChildren2 watch on /brokers/ids fires once per change
    (join, join, leave) and is re-armed each time."""
    admin = env.client()
    ids = kafka_tree(admin, env.base)
    controller = Api(env, "controller")
    controller.get_children2("watch ids", ids, watch=True)
    b1 = Api(env, "broker 1")
    register_broker(b1, "broker 1 joins", ids, 1)
    controller.get_children2("re-arm after join 1", ids, watch=True)
    b2 = Api(env, "broker 2")
    register_broker(b2, "broker 2 joins", ids, 2)
    controller.get_children2("re-arm after join 2", ids, watch=True)
    b2.set_data("broker 2 updates its registration", f"{ids}/2", broker_json(2, 9999))
    controller.sync()
    b1.rc.close_session()
    controller.get_children2("re-arm after broker 1 left", ids, watch=True)
    controller.drain()


@scenario
def kafka_controller_election(env):
    """First /controller wins; the second candidate gets NodeExists, watches with
    exists, hears NodeDeleted when the winner's session ends, and wins; each
    winner bumps /controller_epoch with a version-checked setData."""
    admin = env.client()
    kafka_tree(admin, env.base)
    controller = f"{env.base}/controller"
    epoch = f"{env.base}/controller_epoch"
    one = Api(env, "broker 1")
    two = Api(env, "broker 2")
    one.create("broker 1 elects itself", controller, controller_json(1), EPHEMERAL)
    one.create("broker 1 creates controller_epoch", epoch, b"1")
    two.create("broker 2 elects itself", controller, controller_json(2), EPHEMERAL)
    watched = two.exists("broker 2 watches /controller", controller, watch=True)
    expect(env, watched is not None and watched.err == 0, "/controller exists for the loser")
    two.get_data("broker 2 reads the controller", controller)
    one.rc.close_session()
    two.sync()
    two.create("broker 2 elects itself again", controller, controller_json(2), EPHEMERAL)
    data = two.get_data("broker 2 reads controller_epoch", epoch)
    version = data.value[1].version if data and data.err == 0 else -1
    two.set_data("broker 2 bumps controller_epoch", epoch, b"2", version)
    two.set_data("a stale bump fails", epoch, b"2", version)
    env.call("controller now", admin.get, controller)
    env.call("controller_epoch now", admin.get, epoch)


@scenario
def kafka_fenced_writes(env):
    """Writes fenced by the controller epoch's zkVersion: after a new controller
    moved the epoch on, the old controller's multi (check + setData, check +
    create) fails with BadVersion and applies nothing; the new one's passes."""
    admin = env.client()
    kafka_tree(admin, env.base)
    epoch = f"{env.base}/controller_epoch"
    state = f"{env.base}/brokers/topics/t/partitions/0/state"
    admin.create(epoch, b"1")
    admin.create(state, b'{"leader":1,"leader_epoch":0}', makepath=True)
    old = Api(env, "old controller")
    new = Api(env, "new controller")
    new.set_data("new controller bumps the epoch", epoch, b"2", 0)
    old.multi(
        "old controller: check v0 + setData",
        [
            (OP_CHECK, ustring(epoch) + int32(0)),
            (OP_SET_DATA, set_data_payload(state, b'{"leader":2,"leader_epoch":1}', -1)),
        ],
    )
    old.multi(
        "old controller: check v0 + create",
        [
            (OP_CHECK, ustring(epoch) + int32(0)),
            (OP_CREATE, create_payload(f"{env.base}/brokers/topics/u")),
        ],
    )
    unchanged = old.get_data("state after the fenced write", state)
    expect(
        env,
        unchanged is not None and unchanged.err == 0 and unchanged.value[1].version == 0,
        "the fenced write applied nothing",
    )
    old.exists("topic u not created", f"{env.base}/brokers/topics/u")
    new.multi(
        "new controller: check v1 + setData",
        [
            (OP_CHECK, ustring(epoch) + int32(1)),
            (OP_SET_DATA, set_data_payload(state, b'{"leader":3,"leader_epoch":1}', 0)),
        ],
    )
    new.get_data("state after the new controller's write", state)
