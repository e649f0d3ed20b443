"""Alert emails over SMTP (stdlib smtplib, run in a thread): host, port, STARTTLS, user and password are
settings (ADSLOT_SMTP_*); the password is never shown nor logged, and an error names only the failure."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage

from adslot.settings import Settings

TIMEOUT_SECONDS = 15.0


def send(settings: Settings, to: str, subject: str, text: str) -> None:
    """Send one message; raises OSError or smtplib.SMTPException when it cannot."""
    assert settings.smtp_host, "no SMTP server configured"
    message = EmailMessage()
    message["From"] = settings.smtp_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(text)
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=TIMEOUT_SECONDS) as smtp:
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_user and settings.smtp_password:
            smtp.login(settings.smtp_user, settings.smtp_password)
        smtp.send_message(message)


def failure(exc: BaseException) -> str:
    """What to keep of a failed send: its type and the server's code, never the credentials."""
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{type(exc).__name__}: {exc.smtp_code}"
    return type(exc).__name__
