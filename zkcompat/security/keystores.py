"""Key and trust stores as ZooKeeper reads them (JKS, PKCS12, PEM), by pyjks and cryptography:
a key store gives one private key and its certificate chain, a trust store its certificates."""

from dataclasses import dataclass

import jks
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from zkcompat.security.settings import Store, StoreType

PEM_ENCRYPTED_KEY = b"-----BEGIN ENCRYPTED PRIVATE KEY-----"


class StoreError(ValueError):
    """A store that cannot be read; the message names the setting and the file."""


@dataclass(frozen=True)
class KeyMaterial:
    key: object  # a cryptography private key
    chain: list[x509.Certificate]  # the key's certificate first


def _read(store: Store) -> bytes:
    try:
        return store.location.read_bytes()
    except OSError as e:
        raise StoreError(f"{store.setting}.location: cannot read {store.location}: {e}") from None


def load_key_store(store: Store) -> KeyMaterial:
    """The first private key in the store, with its chain (the store's password opens both,
    as ZooKeeper's X509Util.createKeyManager uses it for both)."""
    data = _read(store)
    try:
        material = _KEY_LOADERS[store.type](data, store.password)
    except StoreError:
        raise
    except Exception as e:  # noqa: BLE001 - each library has its own errors; all mean "unreadable"
        raise StoreError(f"{store.setting}.location: cannot load {store.type} key store "
                         f"{store.location}: {type(e).__name__}: {e}") from None
    if material is None:
        raise StoreError(f"{store.setting}.location: no private key in {store.location}")
    return material


def load_trust_store(store: Store) -> list[x509.Certificate]:
    """Every certificate of the store: each is a trust anchor, as in a Java trust store."""
    data = _read(store)
    try:
        certs = _TRUST_LOADERS[store.type](data, store.password)
    except Exception as e:  # noqa: BLE001 - as above
        raise StoreError(f"{store.setting}.location: cannot load {store.type} trust store "
                         f"{store.location}: {type(e).__name__}: {e}") from None
    if not certs:
        raise StoreError(f"{store.setting}.location: no certificate in {store.location}")
    return certs


def _jks(data: bytes, password: str):
    return jks.KeyStore.loads(data, password, try_decrypt_keys=True)


def _jks_key(data: bytes, password: str) -> KeyMaterial | None:
    for entry in _jks(data, password).private_keys.values():
        if not entry.is_decrypted():
            entry.decrypt(password)
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        chain = [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain]
        return KeyMaterial(key, chain)
    return None


def _jks_certs(data: bytes, password: str) -> list[x509.Certificate]:
    store = _jks(data, password)
    certs = [x509.load_der_x509_certificate(e.cert) for e in store.certs.values()]
    for entry in store.private_keys.values():  # Java trusts a key entry's own certificate too
        certs.extend(x509.load_der_x509_certificate(der) for _, der in entry.cert_chain[:1])
    return certs


def _pkcs12(data: bytes, password: str):
    # Java opens a store whose password is empty with or without one; so does this.
    try:
        return pkcs12.load_pkcs12(data, password.encode("utf-8"))
    except ValueError:
        if password:
            raise
        return pkcs12.load_pkcs12(data, None)


def _pkcs12_key(data: bytes, password: str) -> KeyMaterial | None:
    bundle = _pkcs12(data, password)
    if bundle.key is None or bundle.cert is None:
        return None
    return KeyMaterial(bundle.key, [bundle.cert.certificate]
                       + [c.certificate for c in bundle.additional_certs])


def _pkcs12_certs(data: bytes, password: str) -> list[x509.Certificate]:
    bundle = _pkcs12(data, password)
    certs = [bundle.cert.certificate] if bundle.cert is not None else []
    return certs + [c.certificate for c in bundle.additional_certs]


def _pem_key(data: bytes, password: str) -> KeyMaterial | None:
    """A PEM key store (ZooKeeper's PemReader): a private key, encrypted (PKCS#8) only if a
    password is given, and its certificate chain, in one file."""
    secret = password.encode("utf-8") if password and PEM_ENCRYPTED_KEY in data else None
    key = serialization.load_pem_private_key(data, secret)
    return KeyMaterial(key, x509.load_pem_x509_certificates(data))


def _pem_certs(data: bytes, password: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(data)


_KEY_LOADERS = {StoreType.JKS: _jks_key, StoreType.PKCS12: _pkcs12_key, StoreType.PEM: _pem_key}
_TRUST_LOADERS = {StoreType.JKS: _jks_certs, StoreType.PKCS12: _pkcs12_certs,
                  StoreType.PEM: _pem_certs}
