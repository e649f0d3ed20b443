"""An SMTP server on loopback that requires STARTTLS and a login, with certificates made for the test by the
openssl command: a CA, a server certificate it signed for 127.0.0.1, and one it signed for another name."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.conftest import free_port

USER = "alerts@example.test"
PASSWORD = "smtp-pass-Zq7!never-logged"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    """The CA the operator configures (ADSLOT_SMTP_CA_FILE)."""
    server: tuple[Path, Path]
    """(certificate, key) for IP 127.0.0.1 and DNS localhost."""
    other_name: tuple[Path, Path]
    """(certificate, key) signed by the same CA for mail.example.test only."""


def make_certificates(folder: Path) -> Certificates:
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=adslot test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip
    for name, alt in (("server", "IP:127.0.0.1,DNS:localhost"), ("other", "DNS:mail.example.test")):
        (folder / f"{name}.ext").write_text(
            f"subjectAltName={alt}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
        )
        _openssl(
            "req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=folder
        )
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=folder,
        )  # fmt: skip
    return Certificates(
        folder / "ca.pem",
        (folder / "server.pem", folder / "server.key"),
        (folder / "other.pem", folder / "other.key"),
    )


@dataclass
class Mailbox:
    """What the server accepted, and how each message's session was secured and logged in."""

    messages: list[Message] = field(default_factory=list)
    sessions: list[tuple[bool, bool]] = field(default_factory=list)
    """(over TLS, logged in) of each accepted message."""
    logins: list[tuple[str, str, bool]] = field(default_factory=list)
    """(mechanism, user, password right) of each login tried."""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        self.sessions.append((session.ssl is not None, bool(session.authenticated)))
        return "250 OK"

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        user, password = data.login.decode(), data.password.decode()
        right = user == USER and password == PASSWORD
        self.logins.append((mechanism, user, right))
        return AuthResult(success=right, handled=False)  # a failure answered 535 by the server


def tls_server(
    certificates: Certificates, *, other_name: bool = False, mechanism: str | None = None, tls: bool = True
) -> tuple[Controller, Mailbox]:
    """A started server on 127.0.0.1 requiring STARTTLS (offering none when `tls` is False) and a login over
    it; `mechanism`: the one AUTH mechanism it offers (PLAIN or LOGIN), else both."""
    mailbox = Mailbox()
    context = None
    if tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert, key = certificates.other_name if other_name else certificates.server
        context.load_cert_chain(cert, key)
    excluded = [m for m in ("PLAIN", "LOGIN") if mechanism is not None and m != mechanism]
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=free_port(),
        tls_context=context,
        require_starttls=tls,
        auth_required=True,
        auth_require_tls=tls,
        auth_exclude_mechanism=excluded,
        authenticator=mailbox.authenticate,
    )
    controller.start()
    return controller, mailbox
