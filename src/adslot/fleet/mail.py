"""Alert emails over SMTP (stdlib smtplib, run in a thread): host, port, STARTTLS, a CA file, user and
password are settings (ADSLOT_SMTP_*); the password is never shown nor logged, and an error names only the
failure.

With STARTTLS (the default) the connection is upgraded before anything else is sent, and a server that does
not offer it is refused; the server's certificate must chain to a CA of ADSLOT_SMTP_CA_FILE (when set: only
those) or of the system's store, and name ADSLOT_SMTP_HOST (ssl.create_default_context: TLS 1.2 or later,
host name checked). The login (smtplib picks PLAIN or LOGIN, whichever the server offers) goes only over
that verified connection: settings refuse a user and password without STARTTLS.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage

from adslot.settings import Settings

TIMEOUT_SECONDS = 15.0


def tls_context(settings: Settings) -> ssl.SSLContext:
    """What the server's certificate is checked against: the operator's CA file, else the system's CAs."""
    return ssl.create_default_context(cafile=settings.smtp_ca_file)


def send(settings: Settings, to: str, subject: str, text: str) -> None:
    """Send one message; raises OSError (ssl.SSLError among them) or smtplib.SMTPException when it cannot."""
    assert settings.smtp_host, "no SMTP server configured"
    message = EmailMessage()
    message["From"] = settings.smtp_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(text)
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=TIMEOUT_SECONDS) as smtp:
        if settings.smtp_starttls:
            smtp.starttls(context=tls_context(settings))
        if settings.smtp_user and settings.smtp_password:
            smtp.login(settings.smtp_user, settings.smtp_password)
        smtp.send_message(message)


def failure(exc: BaseException) -> str:
    """What to keep of a failed send: its type and the server's code (or the certificate check's reason),
    never the credentials nor the server's text, which may echo them."""
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{type(exc).__name__}: {exc.smtp_code}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{type(exc).__name__}: {exc.verify_message}"
    return type(exc).__name__
