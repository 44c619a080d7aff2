"""Kafka TLS and SASL/SCRAM settings: environment -> ``KafkaSettings`` -> aiokafka options, secrets hidden."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from services.runtime.kafka import KafkaSettings

PASSWORD = "scram-pass-7f3a9c"
KEY_PASSWORD = "key-pass-51e0"


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key, encrypted with ``KEY_PASSWORD``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate to test TLS options with")
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-days", "1", "-subj", "/CN=muster-test",
                    "-keyout", str(key), "-out", str(cert), "-passout", f"pass:{KEY_PASSWORD}"],
                   check=True, capture_output=True)
    return cert, key


def test_plaintext_is_the_default_and_carries_no_security_options() -> None:
    options = KafkaSettings().client_options()
    assert options["security_protocol"] == "PLAINTEXT"
    assert not {"ssl_context", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password"} & set(options)


def test_sasl_ssl_with_scram_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                  certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    for name, value in {"BOOTSTRAP": "broker.example:9093", "SECURITY_PROTOCOL": "SASL_SSL",
                        "SASL_MECHANISM": "SCRAM-SHA-256", "SASL_USERNAME": "muster-gateway",
                        "SASL_PASSWORD": PASSWORD, "SSL_CAFILE": str(cert), "SSL_CERTFILE": str(cert),
                        "SSL_KEYFILE": str(key), "SSL_KEY_PASSWORD": KEY_PASSWORD}.items():
        monkeypatch.setenv(f"MUSTER_KAFKA_{name}", value)
    settings = KafkaSettings()
    options = settings.client_options()
    assert (options["bootstrap_servers"], options["security_protocol"]) == ("broker.example:9093", "SASL_SSL")
    assert (options["sasl_mechanism"], options["sasl_plain_username"]) == ("SCRAM-SHA-256", "muster-gateway")
    assert options["sasl_plain_password"] == PASSWORD
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "muster-test"),),)]
    for shown in (repr(settings), str(settings), str(settings.model_dump()), settings.model_dump_json()):
        assert PASSWORD not in shown and KEY_PASSWORD not in shown


def test_scram_sha_512_is_the_default_mechanism_and_hostname_checks_can_be_relaxed(
        certificate: tuple[Path, Path]) -> None:
    cert, _ = certificate
    options = KafkaSettings(security_protocol="SASL_SSL", sasl_username="u", sasl_password=PASSWORD,
                            ssl_cafile=str(cert), ssl_check_hostname=False).client_options()
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["ssl_context"].check_hostname is False


def test_tls_without_sasl_and_sasl_without_tls() -> None:
    tls = KafkaSettings(security_protocol="SSL").client_options()
    assert isinstance(tls["ssl_context"], ssl.SSLContext) and "sasl_mechanism" not in tls
    sasl = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password=PASSWORD,
                         sasl_mechanism="PLAIN").client_options()
    assert "ssl_context" not in sasl and sasl["sasl_mechanism"] == "PLAIN"


def test_sasl_without_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="needs sasl_username and sasl_password") as refused:
        KafkaSettings(security_protocol="SASL_SSL", sasl_password=PASSWORD).client_options()
    assert PASSWORD not in str(refused.value)


def test_unknown_protocols_and_mechanisms_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSTER_KAFKA_SASL_MECHANISM", "GSSAPI")
    with pytest.raises(ValueError, match="sasl_mechanism"):
        KafkaSettings()
    monkeypatch.delenv("MUSTER_KAFKA_SASL_MECHANISM")
    monkeypatch.setenv("MUSTER_KAFKA_SECURITY_PROTOCOL", "TLS")
    with pytest.raises(ValueError, match="security_protocol"):
        KafkaSettings()
