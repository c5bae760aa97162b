"""Service discovery: instances register under /services/<name>/<instance> with a JSON
payload (ephemeral, so a dead instance disappears), clients watch the set of instances.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from zkcompat.recipes.membership import GroupMembership

log = logging.getLogger(__name__)

DEFAULT_BASE_PATH = "/services"

Instances = dict[str, dict[str, Any]]
InstancesListener = Callable[[Instances], object]


class ServiceRegistry:
    """Register instances of services, look them up, and watch them.

    `register("billing", "host-a:8080", {"host": "host-a", "port": 8080})` keeps an ephemeral
    `/services/billing/host-a:8080` whose data is the JSON payload, for as long as the
    client's session lives (and re-registers after a session loss, like GroupMembership).
    A payload change is a new registration: unregister, then register again.
    """

    def __init__(self, client: KazooClient, base_path: str = DEFAULT_BASE_PATH) -> None:
        self.client = client
        self.base_path = base_path.rstrip("/")
        self._registrations: dict[tuple[str, str], GroupMembership] = {}

    def service_path(self, service: str) -> str:
        if not service or "/" in service:
            raise ValueError(f"bad service name {service!r}")
        return f"{self.base_path}/{service}"

    def register(self, service: str, instance_id: str, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, sort_keys=True).encode("utf-8")
        member = GroupMembership(self.client, self.service_path(service), instance_id, data)
        member.join()
        self._registrations[(service, instance_id)] = member

    def unregister(self, service: str, instance_id: str) -> None:
        member = self._registrations.pop((service, instance_id), None)
        if member is None:
            member = GroupMembership(self.client, self.service_path(service), instance_id)
        member.leave()

    def instances(self, service: str) -> Instances:
        """{instance id: payload} of every live instance of the service."""
        path = self.service_path(service)
        try:
            children = self.client.retry(self.client.get_children, path)
        except NoNodeError:
            return {}
        return self._payloads(path, children)

    def watch(self, service: str, on_change: InstancesListener) -> ChildrenWatch:
        """Call on_change({instance id: payload}) now and whenever an instance comes or goes,
        on kazoo's callback thread, until it returns False."""
        path = self.service_path(service)
        self.client.retry(self.client.ensure_path, path)
        mutex = threading.Lock()

        def changed(children: list[str]) -> object:
            with mutex:
                return on_change(self._payloads(path, children))

        return ChildrenWatch(self.client, path, changed)

    def _payloads(self, path: str, children: list[str]) -> Instances:
        # Pipelined reads: one round trip for the whole set, not one per instance.
        pending = [(c, self.client.get_async(f"{path}/{c}")) for c in sorted(children)]
        out: Instances = {}
        for child, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue  # it left while we looked
            try:
                out[child] = json.loads(data.decode("utf-8")) if data else {}
            except ValueError:
                log.warning("event=bad_payload path=%s/%s", path, child)
        return out
