"""zoo.cfg's TLS lines as config.load reads them: the stores are opened at start-up (a bad one
stops it, naming the setting, as ZooKeeper's initSSL does), ZooKeeper 3.9's protocol
defaults, the x509 superUser, and the ssl.* settings zkcompat does not obey named in the
one start-up warning."""

from __future__ import annotations

import logging

import pytest

from conftest import PASSWORD
from zkcompat.config import ConfigError, load
from zkcompat.security.tls import server_context

STORE_KINDS = ("PEM", "PKCS12", "JKS")


def _cfg(material, tmp_path, key_kind="PKCS12", trust_kind="PKCS12", **extra) -> dict:
    cfg = {"dataDir": str(tmp_path), "secureClientPort": "0",
           **material.key_store(material.server, key_kind),
           **material.trust_store(trust_kind)}
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_each_store_format_loads(kind, material, tmp_path):
    cfg = load(None, _cfg(material, tmp_path, kind, kind))
    assert cfg.tls.key_store.type == kind and cfg.tls.trust_store.type == kind
    assert "x509" in cfg.auth_schemes
    context = server_context(cfg.tls)
    assert context.verify_mode.name == "CERT_REQUIRED"  # clientAuth's default: need


# Every store with a password: a PEM trust store has none (PemReader ignores it).
@pytest.mark.parametrize("kind, setting", [("PEM", "keyStore"), ("PKCS12", "keyStore"),
                                           ("JKS", "keyStore"), ("PKCS12", "trustStore"),
                                           ("JKS", "trustStore")])
def test_wrong_password_stops_start_up(kind, setting, material, tmp_path):
    if kind == "PEM":
        # A PEM key store is encrypted only if made so: make one with the password.
        cfg = _cfg(material, tmp_path, kind, kind)
        cfg["ssl.keyStore.location"] = str(_encrypted_pem(material, tmp_path))
    else:
        cfg = _cfg(material, tmp_path, kind, kind)
    cfg[f"ssl.{setting}.password"] = "wrong"
    with pytest.raises(ConfigError, match=f"ssl.{setting}.location"):
        load(None, cfg)


def _encrypted_pem(material, tmp_path):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(material.server.key.read_bytes(), None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(PASSWORD.encode()))
    path = tmp_path / "encrypted.pem"
    path.write_bytes(pem + material.server.cert.read_bytes())
    return path


def test_encrypted_pem_key_store_opens_with_its_password(material, tmp_path):
    cfg = _cfg(material, tmp_path, "PEM", "PEM")
    cfg["ssl.keyStore.location"] = str(_encrypted_pem(material, tmp_path))
    assert load(None, cfg).tls.key_store.password == PASSWORD


@pytest.mark.parametrize("change, message", [
    ({"ssl.keyStore.location": "/nonexistent/key.p12"}, "ssl.keyStore.location"),
    ({"ssl.trustStore.location": "/nonexistent/trust.jks"}, "ssl.trustStore.location"),
    ({"ssl.keyStore.type": "BCFKS"}, "ssl.keyStore.type"),
    ({"ssl.keyStore.type": "JKS"}, "ssl.keyStore.location"),  # a PKCS12 file read as JKS
    ({"ssl.keyStore.location": ""}, "ssl.keyStore.location"),  # a secure port needs a key
    ({"ssl.clientAuth": "sometimes"}, "ssl.clientAuth"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ({"ssl.enabledProtocols": "TLSv1.4"}, "ssl.enabledProtocols"),
    ({"ssl.authProvider": "digest"}, "ssl.authProvider"),
])
def test_bad_setting_stops_start_up_naming_it(change, message, material, tmp_path):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load(None, _cfg(material, tmp_path, **change))


def test_protocols_default_to_ssl_protocol_alone(material, tmp_path):
    """ClientX509Util.getEnabledProtocols: ssl.protocol alone unless ssl.enabledProtocols."""
    assert load(None, _cfg(material, tmp_path)).tls.enabled_protocols == ("TLSv1.3",)
    cfg = load(None, _cfg(material, tmp_path, **{"ssl.protocol": "TLSv1.2"}))
    assert cfg.tls.enabled_protocols == ("TLSv1.2",)
    cfg = load(None, _cfg(material, tmp_path, **{"ssl.enabledProtocols": "TLSv1.2,TLSv1.3"}))
    assert cfg.tls.enabled_protocols == ("TLSv1.2", "TLSv1.3")


def _warned(caplog) -> tuple[set[str], set[str]]:
    messages = [r.getMessage() for r in caplog.records]
    lines = [m for m in messages if m.startswith("event=config_not_implemented ")]
    assert len(lines) <= 1, lines
    named = set(lines[0].split("keys=", 1)[1].split(",")) if lines else set()
    unknown = {m.split("key=", 1)[1] for m in messages if "event=config_unknown_key" in m}
    return named, unknown


def test_super_user_is_read_not_warned(material, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = load(None, _cfg(material, tmp_path,
                              **{"X509AuthenticationProvider.superUser": "CN=admin"}))
    assert cfg.tls.super_user == "CN=admin"
    assert _warned(caplog) == (set(), set())


@pytest.mark.parametrize("key, value, warned", [
    ("ssl.crl", "true", True), ("ssl.crl", "false", False),
    ("ssl.ocsp", "true", True), ("ssl.clientHostnameVerification", "true", True),
    ("ssl.clientHostnameVerification", "false", False), ("ssl.sslProvider", "OPENSSL", True),
    ("ssl.hostnameVerification", "true", False),  # ZooKeeper never applies it to clients
])
def test_ssl_settings_not_obeyed_are_named(key, value, warned, material, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        load(None, _cfg(material, tmp_path, **{key: value}))
    named, unknown = _warned(caplog)
    assert named == ({key} if warned else set())
    assert unknown == set()


@pytest.mark.parametrize(("lines", "unified"), [
    ({"client.portUnification": "true"}, True),
    ({"zookeeper.client.portUnification": " TRUE "}, True),  # a system property, trimmed
    ({"client.portUnification": "yes"}, False),  # Boolean.getBoolean: "true" or nothing
    ({"client.portUnification": "false"}, False),
    ({}, False),
])
def test_client_port_unification_reads_the_client_tls(lines, unified, material, tmp_path):
    """client.portUnification makes the plaintext port take TLS: the ssl.* stores are read
    and x509 registered as with a secure port, which it needs not have."""
    cfg = _cfg(material, tmp_path, clientPort="0", **lines)
    del cfg["secureClientPort"]
    config = load(None, cfg)
    assert config.client_port_unification is unified
    assert config.secure_client_port is None
    assert (config.tls is not None) is unified
    assert ("x509" in config.auth_schemes) is unified


def test_client_port_unification_needs_a_plaintext_port(material, tmp_path):
    """With only secureClientPort there is no plaintext factory to unify (ZooKeeper reads
    the property in the factory of clientPort)."""
    config = load(None, _cfg(material, tmp_path, **{"client.portUnification": "true"}))
    assert not config.client_port_enabled
    assert not config.client_port_unification
    assert config.tls is not None


def test_client_port_unification_with_a_bad_store_stops_start_up(material, tmp_path):
    cfg = _cfg(material, tmp_path, clientPort="0", **{"client.portUnification": "true",
                                                       "ssl.keyStore.password": "wrong"})
    del cfg["secureClientPort"]
    with pytest.raises(ConfigError, match="ssl.keyStore.location"):
        load(None, cfg)


@pytest.mark.parametrize(("lines", "reload"), [
    ({"client.certReload": "true"}, True),
    ({"zookeeper.client.certReload": "True"}, True),
    ({"client.certReload": "1"}, False),  # Boolean.getBoolean
    ({}, False),
])
def test_client_cert_reload_is_read_with_the_client_tls(lines, reload, material, tmp_path):
    assert load(None, _cfg(material, tmp_path, **lines)).client_cert_reload is reload


def test_client_cert_reload_without_tls_reloads_nothing(tmp_path):
    config = load(None, {"dataDir": str(tmp_path), "client.certReload": "true"})
    assert config.tls is None and not config.client_cert_reload
