"""ACLs: interning, permission checks and fix-up, as ZooKeeper's checkACL and fixupACL do them.

An ACL is kept as an interned tuple of (perms, scheme, id) triples, so the million
znodes that share OPEN_ACL_UNSAFE share one object. An auth id is a (scheme, id) pair.
"""

import base64
import hashlib
import ipaddress

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, Perms
from zkcompat.tree.errors import KeeperError

AclTuple = tuple[tuple[int, str, str], ...]
AuthId = tuple[str, str]

_interned: dict[AclTuple, AclTuple] = {}


def intern_acl(acl: AclTuple) -> AclTuple:
    return _interned.setdefault(acl, acl)


def acl_from_records(acls: list) -> AclTuple:
    acl = _acl_of_shared.get(id(acls))  # a leader's txn carries a shared list: no rebuild
    if acl is not None:
        return acl
    return intern_acl(tuple((a.perms, a.id.scheme, a.id.id) for a in acls))


def acl_to_records(acl: AclTuple) -> list:
    return [r.ACL(perms, r.Id(scheme, ident)) for perms, scheme, ident in acl]


_records_of: dict[AclTuple, list] = {}
# id() of each shared list -> its ACL. The lists live as long as _records_of, so an id
# here never belongs to another object.
_acl_of_shared: dict[int, AclTuple] = {}


def shared_acl_records(acl: AclTuple) -> list:
    """acl_to_records, made once per interned ACL and shared: for txns, which never change
    their records (a create's ACL is usually one of a handful)."""
    recs = _records_of.get(acl)
    if recs is None:
        recs = _records_of[acl] = acl_to_records(acl)
        _acl_of_shared[id(recs)] = acl
    return recs


# ZooDefs.Perms as plain ints: IntFlag arithmetic is slow on the read path (docs/measurements.md)
PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN, PERM_ALL = (int(p) for p in (
    Perms.READ, Perms.WRITE, Perms.CREATE, Perms.DELETE, Perms.ADMIN, Perms.ALL))

# ZooDefs.Ids
OPEN_ACL_UNSAFE: AclTuple = intern_acl(((int(Perms.ALL), "world", "anyone"),))
READ_ACL_UNSAFE: AclTuple = intern_acl(((int(Perms.READ), "world", "anyone"),))
# Its records are the list the codec decodes world:anyone into and encodes without a loop.
_records_of[OPEN_ACL_UNSAFE] = r.OPEN_ACL_UNSAFE_RECORDS
_acl_of_shared[id(r.OPEN_ACL_UNSAFE_RECORDS)] = OPEN_ACL_UNSAFE
assert acl_to_records(OPEN_ACL_UNSAFE) == r.OPEN_ACL_UNSAFE_RECORDS

SUPER_ID: AuthId = ("super", "")
_OPEN_RECORDS = r.OPEN_ACL_UNSAFE_RECORDS


def _java_string_hash(s: str) -> int:
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")  # Java hashes UTF-16 code units
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h


def _java_id_hash(scheme: str, ident: str) -> int:
    """Id.hashCode as jute generates it: 37*(37*17 + scheme.hashCode()) + id.hashCode()."""
    return (37 * ((37 * 17 + _java_string_hash(scheme)) & 0xFFFFFFFF)
            + _java_string_hash(ident)) & 0xFFFFFFFF


def java_auth_order(auth_ids: list[AuthId]) -> list[AuthId]:
    """The order ZooKeeper iterates a connection's auth ids in: they live in a set backed by
    a ConcurrentHashMap, so "auth" ACL expansion and whoAmI list them by hash bin (ties in
    insertion order), not in the order the client authenticated."""
    size = 16
    while len(auth_ids) >= size - (size >> 2):  # sizeCtl: resize at 3/4 full
        size <<= 1

    def bin_of(item: tuple[int, AuthId]) -> tuple[int, int]:
        h = _java_id_hash(*item[1])
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (size - 1), item[0]

    return [a for _, a in sorted(enumerate(auth_ids), key=bin_of)]


def digest_id(user_password: str) -> str:
    """DigestAuthenticationProvider.generateDigest: user:base64(sha1("user:password"))."""
    user = user_password.split(":", 1)[0]
    sha = hashlib.sha1(user_password.encode("utf-8")).digest()
    return f"{user}:{base64.b64encode(sha).decode('ascii')}"


def _ip_network(expr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """IPAuthenticationProvider's "addr[/bits]" form, or None if malformed."""
    addr, _, bits = expr.partition("/")
    try:
        ip = ipaddress.ip_address(addr)
        prefix = int(bits) if bits else ip.max_prefixlen
        if not 0 <= prefix <= ip.max_prefixlen:
            return None
        return ipaddress.ip_network(f"{ip}/{prefix}", strict=False)
    except ValueError:
        return None


def ip_matches(client_addr: str, expr: str) -> bool:
    net = _ip_network(expr)
    if net is None:
        return False
    try:
        return ipaddress.ip_address(client_addr) in net
    except ValueError:
        return False


def _digest_id_valid(ident: str) -> bool:
    # DigestAuthenticationProvider.isValid: Java's split(":") must give exactly two parts.
    parts = ident.split(":")
    while parts and parts[-1] == "":
        parts.pop()
    return len(parts) == 2


# The server's ProviderRegistry: the schemes an ACL may name, each with its isValid.
# ip and digest are always there; x509 and sasl only once register_scheme adds them.
_VALID_ID = {"digest": _digest_id_valid, "ip": lambda ident: _ip_network(ident) is not None}
# Schemes whose ACL id must equal an auth id of the session (digest's and x509's matches).
_EQUAL_ID_SCHEMES = frozenset(("digest", "x509"))
# SASLAuthenticationProvider.matches: the ACL's id, or any ACL for the sasl id "super".
SASL_SCHEME = "sasl"
_SASL_MATCHES_ANY = "super"
# The auth ids an "auth" ACL expands to: those of registered providers whose
# isAuthenticated is true (ip's is false; super has no provider).
_AUTHENTICATED_SCHEMES = frozenset(("digest", "x509", SASL_SCHEME))


def register_scheme(scheme: str, is_valid) -> None:
    """Make ACL ids of `scheme` valid in create and setACL when is_valid(id) says so: the
    server's ProviderRegistry, which has x509 and sasl only when the configuration
    registers them. Which auth ids a session holds is decided where it authenticates."""
    _VALID_ID[scheme] = is_valid


def scheme_registered(scheme: str) -> bool:
    """Whether the ProviderRegistry has a provider for `scheme`."""
    return scheme in _VALID_ID


def check_acl(acl: AclTuple, perm: int, auth_ids: list[AuthId]) -> None:
    """Raise NOAUTH unless `auth_ids` grant `perm` on a node with `acl` (ZooKeeperServer.checkACL)."""
    if acl is OPEN_ACL_UNSAFE or not acl:
        return
    for scheme, _ in auth_ids:
        if scheme == "super":
            return
    for perms, scheme, ident in acl:
        if not perms & perm:
            continue
        if scheme == "world":
            if ident == "anyone":
                return
        elif scheme == "ip":
            for s, a in auth_ids:
                if s == "ip" and ip_matches(a, ident):
                    return
        elif scheme in _EQUAL_ID_SCHEMES:
            for s, a in auth_ids:
                if s == scheme and a == ident:
                    return
        elif scheme == SASL_SCHEME and SASL_SCHEME in _VALID_ID:
            for s, a in auth_ids:
                if s == SASL_SCHEME and a in (ident, _SASL_MATCHES_ANY):
                    return
    raise KeeperError(Code.NOAUTH)


def fixup_acl(path: str, acls: list | None, auth_ids: list[AuthId]) -> AclTuple:
    """Validate a create/setACL ACL list and expand "auth" ids (PrepRequestProcessor.fixupACL)."""
    if acls is _OPEN_RECORDS:  # as the codec decodes world:anyone with every permission
        return OPEN_ACL_UNSAFE
    if acls is not None and len(acls) == 1:  # the usual case, world:anyone, decided at once
        a = acls[0]
        if a is not None and a.id is not None and a.id.scheme == "world" \
                and a.id.id == "anyone":
            if a.perms == PERM_ALL:
                return OPEN_ACL_UNSAFE
            return intern_acl(((a.perms, "world", "anyone"),))
    unique = []
    for a in acls or ():
        if a not in unique:
            unique.append(a)
    if not unique:
        raise KeeperError(Code.INVALIDACL, path)
    out: list[tuple[int, str, str]] = []
    for a in unique:
        if a is None or a.id is None or a.id.scheme is None:
            raise KeeperError(Code.INVALIDACL, path)
        scheme, ident = a.id.scheme, a.id.id
        if scheme == "world" and ident == "anyone":
            out.append((a.perms, scheme, ident))
        elif scheme == "auth":
            # Expands to every authenticated id of the session; ip ids are not
            # "authenticated" in ZooKeeper's sense (IPAuthenticationProvider.isAuthenticated).
            expanded = [(a.perms, s, i) for s, i in java_auth_order(auth_ids)
                        if s in _AUTHENTICATED_SCHEMES and s in _VALID_ID]
            if not expanded:
                raise KeeperError(Code.INVALIDACL, path)
            out.extend(expanded)
        else:
            valid = _VALID_ID.get(scheme)
            if valid is None or ident is None or not valid(ident):
                raise KeeperError(Code.INVALIDACL, path)
            out.append((a.perms, scheme, ident))
    return intern_acl(tuple(out))
