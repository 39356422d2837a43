"""The files of the local secured broker (``kafka up --secure``): a CA and a broker certificate
made with ``openssl``, SCRAM-SHA-512 users with random passwords, and one client properties file
per user, so ``SCHEDULERSTREAM_KAFKA_CONFIG_FILE=<file>`` is all a client needs.

Everything lives under ``{data_dir}/kafka/secure`` (mode 0700; keys, passwords and properties
files 0600). Passwords are made once per data dir and never printed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from schedulerstream.errors import BrokerError

SCRAM = "SCRAM-SHA-512"
ADMIN = "admin"  # the super user whose properties file `kafka up --secure` prints
BROKER = "broker"  # the broker's own principal (inter-broker and controller connections)
# one user per component, so each runs as its own principal with only its ACLs (acls plan)
COMPONENT_USERS = ("scheduler", "dispatcher", "projector", "api", "worker", "connect")
USERS = (ADMIN, BROKER, *COMPONENT_USERS)
CERT_DAYS = 825


@dataclass(frozen=True)
class SecureFiles:
    """Where the secured broker's certificates, passwords and client files are."""

    root: Path

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.pem"

    @property
    def broker_pem(self) -> Path:
        """The broker's key (PKCS#8) and certificate chain, a PEM key store."""
        return self.root / "broker.pem"

    @property
    def passwords(self) -> Path:
        return self.root / "passwords.json"

    def client_properties(self, user: str) -> Path:
        return self.root / "clients" / f"{user}.properties"

    def exists(self) -> bool:
        return self.passwords.exists()


def prepare(files: SecureFiles, host: str) -> dict[str, str]:
    """Make what is missing (certificates for ``host``, passwords, client files); return the
    passwords by user."""
    files.root.mkdir(parents=True, exist_ok=True)
    files.root.chmod(0o700)
    if not (files.ca_cert.exists() and files.broker_pem.exists()):
        _make_certificates(files, host)
    passwords = _passwords(files)
    clients = files.client_properties(ADMIN).parent
    clients.mkdir(exist_ok=True)
    for user, password in passwords.items():
        if user != BROKER:
            _write_private(files.client_properties(user), client_properties(files, user, password))
    return passwords


def client_properties(files: SecureFiles, user: str, password: str) -> str:
    """A client properties file (librdkafka names) authenticating as ``user`` over TLS."""
    return (
        f"# {user}: SASL_SSL with {SCRAM}, trusting the local CA (made by kafka up --secure)\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={SCRAM}\n"
        f"sasl.username={user}\n"
        f"sasl.password={_escape(password)}\n"
        f"ssl.ca.location={_escape(str(files.ca_cert.resolve()))}\n"
    )


def client_config(files: SecureFiles, user: str) -> dict[str, str]:
    """``user``'s client properties as a librdkafka config (for the broker's own probes)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM,
        "sasl.username": user,
        "sasl.password": _passwords(files)[user],
        "ssl.ca.location": str(files.ca_cert.resolve()),
    }


def broker_properties(files: SecureFiles, host: str, port: int) -> dict[str, str]:
    """server.properties entries: SASL_SSL (SCRAM-SHA-512) for clients at ``host:port``, SASL_SSL
    (PLAIN, the broker's own user) for the controller at ``port + 1``, ACLs on."""
    password = _passwords(files)[BROKER]
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    controller = f"{host}:{port + 1}"
    return {
        "controller.quorum.voters": f"1@{controller}",
        "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{controller}",
        "advertised.listeners": f"SASL_SSL://{host}:{port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        # SCRAM credentials live in the metadata log, which the controller serves: its own
        # listener takes PLAIN with the broker's user, defined here.
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            f'{scram} required username="{BROKER}" password="{password}";'
        ),
        "listener.name.controller.plain.sasl.jaas.config": (
            f'{plain} required username="{BROKER}" password="{password}" '
            f'user_{BROKER}="{password}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.broker_pem.resolve()),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_cert.resolve()),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:{BROKER}",
        "allow.everyone.if.no.acl.found": "false",
    }


def format_arguments(files: SecureFiles) -> list[str]:
    """``kafka-storage format`` arguments creating every user's SCRAM credential (KRaft keeps
    them in the metadata log; this is the only way to have the admin before the broker runs)."""
    args: list[str] = []
    for user, password in _passwords(files).items():
        args += ["--add-scram", f"{SCRAM}=[name={user},password={password}]"]
    return args


def _passwords(files: SecureFiles) -> dict[str, str]:
    if files.passwords.exists():
        stored: dict[str, str] = json.loads(files.passwords.read_text())
        if set(USERS) <= set(stored):
            return stored
    else:
        stored = {}
    # letters and digits only: no quoting in JAAS, properties files or --add-scram
    made = {u: stored.get(u) or secrets.token_hex(20) for u in USERS}
    _write_private(files.passwords, json.dumps(made, indent=1))
    return made


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    path.chmod(0o600)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\")


def _subject_names(host: str) -> str:
    names = {"DNS:localhost", "IP:127.0.0.1"}
    try:
        ipaddress.ip_address(host)
        names.add(f"IP:{host}")
    except ValueError:
        names.add(f"DNS:{host}")
    return ",".join(sorted(names))


def _make_certificates(files: SecureFiles, host: str) -> None:
    """A self-signed CA and a broker certificate it signs, valid for ``host`` and localhost."""
    if shutil.which("openssl") is None:
        raise BrokerError("openssl is not on PATH (kafka up --secure makes its certificates)")
    work = files.root / "work"
    work.mkdir(exist_ok=True)
    key, csr = work / "broker.key", work / "broker.csr"
    extensions = work / "broker.ext"
    extensions.write_text(
        f"subjectAltName={_subject_names(host)}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    days = str(CERT_DAYS)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(files.ca_key),
        "-out", str(files.ca_cert), "-days", days, "-subj", "/CN=schedulerstream local CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
             "-subj", f"/CN={host}")  # fmt: skip
    cert = work / "broker.crt"
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(files.ca_cert), "-CAkey", str(files.ca_key),
        "-set_serial", str(secrets.randbits(63)), "-out", str(cert), "-days", days,
        "-extfile", str(extensions),
    )  # fmt: skip
    _write_private(files.broker_pem, key.read_text() + cert.read_text())
    files.ca_key.chmod(0o600)
    shutil.rmtree(work)


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BrokerError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")
