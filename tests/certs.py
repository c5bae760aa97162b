"""Key material for the TLS tests (tests/security, and the quorum's in tests/ensemble), made
with openssl and keytool as an operator makes it: a CA, a server certificate for 127.0.0.1
and localhost (for server and client use: an ensemble's members present it both ways),
three client certificates the CA signed (two plain subjects and one whose subject needs RFC
2253's escapes and hex forms), and a client certificate of another CA (untrusted); each key
store in JKS, PKCS12 and PEM, each trust store likewise. Every tool runs with a time limit."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

TOOL_TIMEOUT_S = 60
PASSWORD = "testpass"
CLIENT_SUBJECT = "/O=zk/OU=test/CN=client"  # openssl's order: most general first
CLIENT_ID = "CN=client,OU=test,O=zk"  # X500Principal.getName(): most specific first
PEER_SUBJECT = "/O=zk/OU=test/CN=peer"
PEER_ID = "CN=peer,OU=test,O=zk"
# Escaped ",", a multi-valued RDN, quotes, a trailing space, DC and UID keywords and an
# attribute RFC 2253 has no keyword for (emailAddress: Java prints its OID and DER in hex).
ODD_SUBJECT = ('/DC=org/DC=example/O=zk\\, Inc./OU=ops\\+x+UID=42'
               '/CN=odd \\"client\\" /emailAddress=odd@example.org')
OTHER_SUBJECT = "/O=elsewhere/CN=stranger"


def run(*args: str, cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT_S)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"


@dataclass(frozen=True)
class Party:
    """One certificate holder: its key and certificate as PEM files, and its key store in
    each format."""

    key: Path
    cert: Path
    pem: Path  # key and certificate chain in one file (ZooKeeper's PEM key store)
    p12: Path
    jks: Path


@dataclass(frozen=True)
class Material:
    dir: Path
    ca_cert: Path
    trust_pem: Path
    trust_p12: Path
    trust_jks: Path
    server: Party
    client: Party
    peer: Party  # another client the CA signed
    odd: Party  # a client whose subject needs escapes
    stranger: Party  # signed by a CA the server does not trust
    misnamed: Party  # a server certificate the CA signed for another address and name

    def key_store(self, party: Party, kind: str) -> dict[str, str]:
        path = {"PEM": party.pem, "PKCS12": party.p12, "JKS": party.jks}[kind]
        return {"ssl.keyStore.location": str(path), "ssl.keyStore.password": PASSWORD}

    def trust_store(self, kind: str) -> dict[str, str]:
        path = {"PEM": self.trust_pem, "PKCS12": self.trust_p12, "JKS": self.trust_jks}[kind]
        return {"ssl.trustStore.location": str(path), "ssl.trustStore.password": PASSWORD}


def _ca(d: Path, name: str, subject: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}.key", d / f"{name}.crt"
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
        "-out", str(cert), "-days", "2", "-subj", subject,
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    return key, cert


def _party(d: Path, name: str, subject: str, ca: tuple[Path, Path], ext: str) -> Party:
    key, csr, cert = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt"
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
        str(csr), "-subj", subject, cwd=d)
    extfile = d / f"{name}.ext"
    extfile.write_text(ext)
    run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[1]), "-CAkey", str(ca[0]),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extfile), cwd=d)
    pem = d / f"{name}.pem"
    pem.write_text(key.read_text() + cert.read_text() + ca[1].read_text())
    p12 = d / f"{name}.p12"
    run("openssl", "pkcs12", "-export", "-inkey", str(key), "-in", str(cert), "-certfile",
        str(ca[1]), "-name", name, "-out", str(p12), "-passout", f"pass:{PASSWORD}", cwd=d)
    jks = d / f"{name}.jks"
    run("keytool", "-importkeystore", "-srckeystore", str(p12), "-srcstoretype", "PKCS12",
        "-srcstorepass", PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
        "-deststorepass", PASSWORD, "-destkeypass", PASSWORD, "-noprompt", cwd=d)
    return Party(key, cert, pem, p12, jks)


def _trust_store(d: Path, ca_cert: Path, kind: str, path: Path) -> Path:
    run("keytool", "-importcert", "-alias", "ca", "-file", str(ca_cert), "-keystore",
        str(path), "-storetype", kind, "-storepass", PASSWORD, "-noprompt", cwd=d)
    return path


def make_material(d: Path) -> Material:
    """Every certificate and store, in directory d."""
    for tool in ("openssl", "keytool"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH (openssl; keytool comes with the JDK, "
                        "scripts/install-zookeeper)")
    ca = _ca(d, "ca", "/O=zk/CN=test-ca")
    other_ca = _ca(d, "other-ca", "/O=elsewhere/CN=other-ca")
    server = _party(d, "server", "/O=zk/CN=localhost", ca,
                    "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
    client = _party(d, "client", CLIENT_SUBJECT, ca, "extendedKeyUsage=clientAuth\n")
    peer = _party(d, "peer", PEER_SUBJECT, ca, "extendedKeyUsage=clientAuth\n")
    odd = _party(d, "odd", ODD_SUBJECT, ca, "extendedKeyUsage=clientAuth\n")
    stranger = _party(d, "stranger", OTHER_SUBJECT, other_ca, "extendedKeyUsage=clientAuth\n")
    misnamed = _party(d, "misnamed", "/O=zk/CN=elsewhere.example", ca,
                      "subjectAltName=IP:127.0.0.9,DNS:elsewhere.example\n"
                      "extendedKeyUsage=serverAuth,clientAuth\n")
    trust_pem = d / "trust.pem"
    shutil.copy(ca[1], trust_pem)
    return Material(d, ca[1], trust_pem,
                    _trust_store(d, ca[1], "PKCS12", d / "trust.p12"),
                    _trust_store(d, ca[1], "JKS", d / "trust.jks"),
                    server, client, peer, odd, stranger, misnamed)
