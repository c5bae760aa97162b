"""deploy/k8s/zkcompat.yaml against the Kubernetes API schemas (kubernetes-validate ships
them, so this runs offline; strict: an unknown field is an error), and the shape of the
Kubernetes tutorial's ZooKeeper: a headless service, myid from the pod ordinal, ruok
readiness. Running it needs a cluster, which these machines do not have."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from zkcompat import config
from zkcompat.cli import container

pytestmark = pytest.mark.timeout(60)

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "zkcompat.yaml"
# The oldest release whose API has every kind used here (policy/v1 PodDisruptionBudget).
K8S_VERSIONS = ("1.25.0", latest_version())


def _docs() -> dict[str, dict]:
    return {d["kind"] + "/" + d["metadata"]["name"]: d
            for d in yaml.safe_load_all(MANIFEST.read_text())}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifest_is_valid_for_the_api(version):
    docs = _docs()
    assert set(docs) == {"Service/zk-hs", "Service/zk-cs", "PodDisruptionBudget/zk-pdb",
                         "StatefulSet/zk"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_a_broken_manifest():
    broken = copy.deepcopy(_docs()["StatefulSet/zk"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exek"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, latest_version(), strict=True)


def _env(container_spec: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container_spec["env"]}


def test_statefulset_is_the_tutorials_shape(tmp_path):
    docs = _docs()
    hs, sts = docs["Service/zk-hs"], docs["StatefulSet/zk"]
    assert hs["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == "zk-hs" and sts["spec"]["replicas"] == 3
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == container.IMAGE_UID
    (server,) = pod["containers"]
    probe = ["python", "-m", "zkcompat.cli.container", "ruok"]
    # ruok, which a member without a quorum answers too: anything stricter would keep zk-0
    # unready (OrderedReady would never create zk-1) or restart it while it waits.
    assert server["readinessProbe"]["exec"]["command"] == probe
    assert server["livenessProbe"]["exec"]["command"] == probe
    mounts = {m["mountPath"] for m in server["volumeMounts"]}
    assert mounts == {"/data", "/datalog"}
    # Each pod's entrypoint makes a zoo.cfg zkcompat reads as server ordinal+1 of three.
    env = _env(server)
    for ordinal in range(3):
        dirs = {"ZOO_CONF_DIR": str(tmp_path / f"c{ordinal}"),
                "ZOO_DATA_DIR": str(tmp_path / f"d{ordinal}"),
                "ZOO_DATA_LOG_DIR": str(tmp_path / f"l{ordinal}")}
        cfg_path, _ = container.prepare({**env, **dirs}, hostname=f"zk-{ordinal}")
        cfg = config.load(cfg_path)
        assert cfg.server_id == ordinal + 1 and cfg.is_ensemble
        assert cfg.servers[ordinal + 1].host == f"zk-{ordinal}.zk-hs"
        assert cfg.quorum_listen_on_all_ips and "ruok" in cfg.four_letter_words
