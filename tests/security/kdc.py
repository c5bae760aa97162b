"""A real MIT KDC for the Kerberos tests: a realm made in a temp dir with kdb5_util and
kadmin.local (Debian's krb5-kdc and krb5-admin-server), krb5kdc listening on loopback only,
keytabs for the principals a test names, and the krb5.conf clients and servers read
(KRB5_CONFIG for MIT, -Djava.security.krb5.conf for Java). Stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conformance_tests.servers import HOST, free_port

REALM = "ZKCOMPAT.TEST"
TOOL_TIMEOUT_S = 60
KDC_START_S = 10.0
TOOLS = ("kdb5_util", "kadmin.local", "krb5kdc", "kinit")


@dataclass
class Kdc:
    dir: Path
    port: int
    krb5_conf: Path
    kdc_conf: Path
    process: subprocess.Popen | None = None
    keytabs: dict[str, Path] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def run(self, *args: str) -> str:
        done = subprocess.run(args, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                              env={**os.environ, **self.env()})
        assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def keytab(self, principal: str) -> Path:
        """A new principal with a random key, and a keytab holding it."""
        if principal not in self.keytabs:
            path = self.dir / (principal.replace("/", "_").replace("@", "_") + ".keytab")
            self.run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {principal}")
            self.run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {path} {principal}")
            self.keytabs[principal] = path
        return self.keytabs[principal]

    def kinit(self, principal: str) -> Path:
        """A credential cache with principal's TGT, from its keytab (for kazoo's GSSAPI)."""
        ccache = self.dir / (principal.replace("/", "_").replace("@", "_") + ".ccache")
        self.run("kinit", "-k", "-t", str(self.keytab(principal)), "-c", f"FILE:{ccache}",
                 principal)
        return ccache

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def _write_confs(d: Path, port: int) -> tuple[Path, Path]:
    krb5_conf, kdc_conf = d / "krb5.conf", d / "kdc.conf"
    krb5_conf.write_text(f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false

[realms]
    {REALM} = {{
        kdc = {HOST}:{port}
    }}

[domain_realm]
    localhost = {REALM}
""")
    kdc_conf.write_text(f"""[kdcdefaults]
    kdc_listen = {HOST}:{port}
    kdc_tcp_listen = {HOST}:{port}

[realms]
    {REALM} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
        max_life = 1h
    }}

[logging]
    kdc = FILE:{d}/kdc.log
""")
    (d / "kadm5.acl").write_text("")
    return krb5_conf, kdc_conf


def start_kdc(d: Path) -> Kdc:
    for tool in TOOLS:
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            pytest.fail(f"{tool} missing: scripts/install-zookeeper installs krb5-kdc, "
                        "krb5-admin-server and krb5-user")
    port = free_port()
    krb5_conf, kdc_conf = _write_confs(d, port)
    kdc = Kdc(d, port, krb5_conf, kdc_conf)
    kdc.run("kdb5_util", "create", "-s", "-r", REALM, "-P", "master-password-for-tests")
    log = (d / "krb5kdc.out").open("wb")
    kdc.process = subprocess.Popen(["krb5kdc", "-n", "-r", REALM], stdout=log, stderr=log,
                                   env={**os.environ, **kdc.env()})
    deadline = time.monotonic() + KDC_START_S
    while time.monotonic() < deadline:
        assert kdc.process.poll() is None, (d / "krb5kdc.out").read_text()
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return kdc
        except OSError:
            time.sleep(0.1)
    kdc.stop()
    pytest.fail(f"krb5kdc did not listen on {HOST}:{port} in {KDC_START_S} s")


def krb5_login_section(section: str, principal: str, keytab, **options: str) -> str:
    """A JAAS section that logs `principal` in from `keytab` (Krb5LoginModule, as
    ZooKeeper's docs write it), with any further options."""
    extra = "".join(f"\n    {key}={value}" for key, value in options.items())
    return f"""{section} {{
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false{extra}
    principal="{principal}";
}};
"""
