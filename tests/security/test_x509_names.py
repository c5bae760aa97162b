"""The x509 scheme's names checked against ZooKeeper's own code (java/X500Oracle.java on
Debian's zookeeper.jar): the id a client certificate gives (X509AuthenticationProvider's
getClientId, RFC 2253 as Java prints it) and the ACL ids isValid accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509 as cx509
from cryptography.hazmat.primitives.serialization import Encoding

from conftest import CLIENT_ID, PEER_ID
from zkcompat.security.x509 import is_valid_name, subject_id

ORACLE_SOURCE = Path(__file__).parent / "java" / "X500Oracle.java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_NOP_JAR = Path("/usr/share/java/slf4j-nop.jar")
JAVA_TIMEOUT_S = 120

# ACL ids an operator might write, well formed or not, in both of X500Principal's forms.
ACL_IDS = [
    "", " ", "CN=a", "cn=a", "CN=a,OU=b,O=c", "CN=a, OU=b; O=c", "CN=a+OU=b",
    'CN="quoted, name"', "CN=a\\,b", "CN=a\\2Cb", "CN=a\\zz", "CN=a\\", "CN=#0403616263",
    "CN=#zz", "CN=#", "CN=#04", "OID.2.5.4.3=a", "oid.2.5.4.3=a", "2.5.4.3=a",
    "1.2.840.113549.1.9.1=#160161", "EMAILADDRESS=a@b", "EMAIL=a@b", "XX=a", "=a", "CN",
    "CN=", "CN=a,", ",CN=a", "CN=a,,O=b", "CN=a<b", "CN=a>b", 'CN=a"b', "CN= a ",
    "CN=a;O=b", "CN=a=b", "CN=a+", "SERIALNUMBER=1", "DNQ=x", "DNQUALIFIER=x", "S=x", "T=x",
    "IP=1.2.3.4", "UID=x", "DC=x", "STREET=x", "SURNAME=x", "GIVENNAME=x", "INITIALS=x",
    "GENERATION=x", "CN=a\\ ", "not a name", "CN=\u00e9t\u00e9", "CN=a\nb", "O=zk\\, Inc.",
    'CN="unterminated', 'CN=a"', "  CN = a  ,  O = b  ", "CN=a\\+b", "CN=a\\;b",
    "CN=a\\\\b", "CN=a\\\"b", "CN=a#b", "CN=\\#a", "CN=a\\<b", "CN=a\\=b", "CN=a++O=b",
    "CN=a;;O=b", "1.2=a", "1=a", "OID.1=a", "CN=\"a\"b", "CN=\"a\" ", "CN=a, ", "CN=a ;",
    "CN=#0400", "CN=#040161", "CN=#04016161", "CN=#04810161", "CN=#0481800061",
    "CN=#048200" + "05" + "00" * 5, "CN=#0480", "CN=#1F00", "CN=#3F00",
    "CN=#3000", "CN=#A0023000", "CN=#0484FFFFFFFF00", "CN=#04850000000001", "CN=a\\\\ ", "CN=a\\\\\\ ",
    " CN=a", "CN=a\\t", "CN=\\20a", "CN=a\\20",
    CLIENT_ID, PEER_ID,
]


@pytest.fixture(scope="module")
def oracle_classes(tmp_path_factory) -> Path:
    if shutil.which("javac") is None or not ZOOKEEPER_JAR.exists():
        pytest.fail("javac or zookeeper.jar missing: run scripts/install-zookeeper")
    out = tmp_path_factory.mktemp("x500-oracle")
    done = subprocess.run(["javac", "-d", str(out), "-cp", str(ZOOKEEPER_JAR),
                           str(ORACLE_SOURCE)], capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return out


def _oracle(classes: Path, certs: list[Path], names: list[str]) -> list[str]:
    classpath = ":".join((str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)))
    stdin = "".join(name.encode("utf-8").hex() + "\n" for name in names)
    done = subprocess.run(["java", "-Xshare:auto", "-cp", classpath, "X500Oracle",
                           *map(str, certs)], input=stdin, capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(certs) + len(names), done.stdout
    return lines


def test_client_ids_are_what_zookeeper_names_them(material, oracle_classes):
    parties = (material.client, material.peer, material.odd, material.stranger,
               material.server)
    certs = [p.cert for p in parties]
    java = _oracle(oracle_classes, certs, [])
    ours = []
    for path in certs:
        der = cx509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)
        ours.append("id " + subject_id(der))
    assert ours == java
    assert java[0] == f"id {CLIENT_ID}"
    # The odd subject really needs the escapes, the multi-valued RDN and the hex form.
    assert "\\, Inc." in java[2] and "+UID=42" in java[2] and "=#16" in java[2]


def test_acl_ids_valid_as_x509authenticationprovider_says(oracle_classes):
    java = _oracle(oracle_classes, [], ACL_IDS)
    ours = ["valid" if is_valid_name(name) else "invalid" for name in ACL_IDS]
    differ = [(name, j, o) for name, j, o in zip(ACL_IDS, java, ours, strict=True) if j != o]
    assert differ == [], differ
    assert "valid" in java and "invalid" in java
