"""Alert email over a real SMTP server on loopback that requires STARTTLS and a login: the certificate is
verified against the CA file the operator configures (chain and host name), the login goes only over that
connection, and the password is in no log line nor in what a failure keeps."""

from __future__ import annotations

import dataclasses
import logging
import smtplib
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from adslot.fleet import mail
from adslot.settings import DEFAULTS, Settings, SettingsError, load_settings
from tests.fleet.smtp import PASSWORD, USER, Certificates, make_certificates, tls_server

TO = "ops@example.test"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def settings_for(port: int, certificates: Certificates, **changes: object) -> Settings:
    base = dataclasses.replace(
        DEFAULTS,
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_ca_file=certificates.ca,
        smtp_user=USER,
        smtp_password=PASSWORD,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
def test_a_message_goes_over_verified_starttls_with_the_login_the_server_offers(
    certificates: Certificates, mechanism: str, logs: pytest.LogCaptureFixture
) -> None:
    server, mailbox = tls_server(certificates, mechanism=mechanism)
    try:
        mail.send(settings_for(server.port, certificates), TO, "adslot alert: raised", "screen s1 is silent")
    finally:
        server.stop()
    assert [m["Subject"] for m in mailbox.messages] == ["adslot alert: raised"]
    assert mailbox.sessions == [(True, True)]  # over TLS, logged in
    assert mailbox.logins == [(mechanism, USER, True)]


def test_a_server_whose_certificate_the_configured_ca_did_not_sign_gets_no_login(
    certificates: Certificates, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    other = make_certificates(tmp_path)  # another CA: the server's chain does not lead to it
    server, mailbox = tls_server(certificates)
    try:
        with pytest.raises(ssl.SSLCertVerificationError) as refused:
            mail.send(settings_for(server.port, other), TO, "s", "t")
        with pytest.raises(ssl.SSLCertVerificationError):  # nor by the system's CAs, without a CA file
            mail.send(settings_for(server.port, certificates, smtp_ca_file=None), TO, "s", "t")
    finally:
        server.stop()
    assert mailbox.logins == [] and mailbox.messages == []
    assert mail.failure(refused.value).startswith("SSLCertVerificationError: ")


def test_a_certificate_for_another_host_name_is_refused_though_the_ca_signed_it(
    certificates: Certificates, logs: pytest.LogCaptureFixture
) -> None:
    server, mailbox = tls_server(certificates, other_name=True)
    try:
        with pytest.raises(ssl.SSLCertVerificationError) as refused:
            mail.send(settings_for(server.port, certificates), TO, "s", "t")
    finally:
        server.stop()
    assert mailbox.logins == [] and mailbox.messages == []
    assert "127.0.0.1" in mail.failure(refused.value)


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")  # the point
def test_a_server_that_offers_no_starttls_is_refused_before_the_login(
    certificates: Certificates, logs: pytest.LogCaptureFixture
) -> None:
    server, mailbox = tls_server(certificates, tls=False)
    try:
        with pytest.raises(smtplib.SMTPNotSupportedError):
            mail.send(settings_for(server.port, certificates), TO, "s", "t")
    finally:
        server.stop()
    assert mailbox.logins == [] and mailbox.messages == []


def test_a_wrong_password_fails_with_the_server_code_alone(
    certificates: Certificates, logs: pytest.LogCaptureFixture
) -> None:
    server, mailbox = tls_server(certificates)
    wrong = PASSWORD + "-wrong"
    try:
        with pytest.raises(smtplib.SMTPAuthenticationError) as refused:
            mail.send(settings_for(server.port, certificates, smtp_password=wrong), TO, "s", "t")
    finally:
        server.stop()
    assert mailbox.messages == [] and mailbox.logins and not any(right for *_, right in mailbox.logins)
    assert mail.failure(refused.value) == "SMTPAuthenticationError: 535"
    assert wrong not in logs.text


def test_smtp_settings_read_the_ca_file_and_refuse_a_login_without_starttls(
    certificates: Certificates,
) -> None:
    env = {
        "ADSLOT_SMTP_HOST": "mail.example.test",
        "ADSLOT_SMTP_USER": USER,
        "ADSLOT_SMTP_PASSWORD": PASSWORD,
    }
    settings = load_settings(env | {"ADSLOT_SMTP_CA_FILE": str(certificates.ca)})
    assert (settings.smtp_starttls, settings.smtp_ca_file) == (True, certificates.ca)
    assert PASSWORD not in repr(settings)
    with pytest.raises(SettingsError, match="ADSLOT_SMTP_CA_FILE"):
        load_settings(env | {"ADSLOT_SMTP_CA_FILE": str(certificates.ca) + ".missing"})
    with pytest.raises(SettingsError, match="need ADSLOT_SMTP_STARTTLS") as refused:
        load_settings(env | {"ADSLOT_SMTP_STARTTLS": "0"})
    assert PASSWORD not in str(refused.value)
    assert load_settings(env | {"ADSLOT_SMTP_STARTTLS": "0", "ADSLOT_SMTP_USER": ""}).smtp_starttls is False
