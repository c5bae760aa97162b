"""The requests zkCli sends that kazoo 2.11 has no API for, as kazoo-style request records.

Each is handed to KazooClient._call; kazoo calls deserialize only when the reply's err is 0,
in its reader thread, which is where a registration must happen to see the first event.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from kazoo.protocol.serialization import (
    int_struct,
    long_struct,
    read_string,
    stat_struct,
    write_buffer,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from zkcompat.jute.constants import OpCode

# AddWatchMode.getMode() and Watcher.WatcherType.getIntValue()
ADD_WATCH_MODES = {"PERSISTENT": 0, "PERSISTENT_RECURSIVE": 1}
WATCHER_TYPES = {"Children": 1, "Data": 2, "Any": 3, "Persistent": 4,
                 "PersistentRecursive": 5}


def _acl_bytes(acl) -> bytes:
    b = bytearray(int_struct.pack(len(acl)))
    for a in acl:
        b += int_struct.pack(a.perms) + write_string(a.id.scheme) + write_string(a.id.id)
    return bytes(b)


def _read_path_and_maybe_stat(buffer, offset):
    path, offset = read_string(buffer, offset)
    if len(buffer) - offset >= stat_struct.size:
        return path, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))
    return path, None


class CreateAny(namedtuple("CreateAny", "type path data acl flags")):
    """CreateRequest under opcode create (1) or createContainer (19); data None is null."""

    def serialize(self) -> bytes:
        return (write_string(self.path) + write_buffer(self.data) + _acl_bytes(self.acl)
                + int_struct.pack(self.flags))

    @classmethod
    def deserialize(cls, buffer, offset):
        return _read_path_and_maybe_stat(buffer, offset)


class CreateTTL(namedtuple("CreateTTL", "path data acl flags ttl")):
    type = int(OpCode.CREATE_TTL)

    def serialize(self) -> bytes:
        return (write_string(self.path) + write_buffer(self.data) + _acl_bytes(self.acl)
                + int_struct.pack(self.flags) + long_struct.pack(self.ttl))

    @classmethod
    def deserialize(cls, buffer, offset):
        return _read_path_and_maybe_stat(buffer, offset)


class AddWatch(namedtuple("AddWatch", "path mode on_ok")):
    """AddWatchRequest; on_ok(path, mode) runs in kazoo's reader thread on success."""

    type = int(OpCode.ADD_WATCH)

    def serialize(self) -> bytes:
        return write_string(self.path) + int_struct.pack(self.mode)

    def deserialize(self, buffer, offset):  # kazoo calls it on the instance
        self.on_ok(self.path, self.mode)
        return True


class RemoveWatches(namedtuple("RemoveWatches", "path watcher_type on_ok")):
    type = int(OpCode.REMOVE_WATCHES)

    def serialize(self) -> bytes:
        return write_string(self.path) + int_struct.pack(self.watcher_type)

    def deserialize(self, buffer, offset):
        self.on_ok(self.path, self.watcher_type)
        return True


class GetEphemerals(namedtuple("GetEphemerals", "prefix_path")):
    type = int(OpCode.GET_EPHEMERALS)

    def serialize(self) -> bytes:
        return write_string(self.prefix_path)

    @classmethod
    def deserialize(cls, buffer, offset):
        count = int_struct.unpack_from(buffer, offset)[0]
        offset += int_struct.size
        paths = []
        for _ in range(max(count, 0)):
            path, offset = read_string(buffer, offset)
            paths.append(path)
        return paths


class GetAllChildrenNumber(namedtuple("GetAllChildrenNumber", "path")):
    type = int(OpCode.GET_ALL_CHILDREN_NUMBER)

    def serialize(self) -> bytes:
        return write_string(self.path)

    @classmethod
    def deserialize(cls, buffer, offset):
        return int_struct.unpack_from(buffer, offset)[0]


class WhoAmI(namedtuple("WhoAmI", "unused", defaults=(None,))):
    """No body; one field all the same, since kazoo drops the reply of a falsy request."""

    type = int(OpCode.WHO_AM_I)

    def serialize(self) -> bytes:
        return b""

    @classmethod
    def deserialize(cls, buffer, offset):
        count = int_struct.unpack_from(buffer, offset)[0]
        offset += int_struct.size
        infos = []
        for _ in range(max(count, 0)):
            scheme, offset = read_string(buffer, offset)
            user, offset = read_string(buffer, offset)
            infos.append((scheme, user))
        return infos


OnOk = Callable[[str, int], None]
