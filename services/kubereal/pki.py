"""Certificates and keys of a local control plane: one CA, the API server's serving certificate, and
the key pair that signs ServiceAccount tokens; and, per workload controller, a webhook CA of its own
and the serving certificate of its webhooks. Written once into the state directory and reused."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)
API_SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local")
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")
#: "RSA PRIVATE KEY" PEM, the one form cert-controller reads a CA key in
PKCS1 = serialization.PrivateFormat.TraditionalOpenSSL
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files under ``<state>/pki``."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: PrivateKey,
               form: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca_certificate(name: str, key: PrivateKey, start: dt.datetime,
                    dns_names: tuple[str, ...] = ()) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
    )
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]),
                                        critical=False)
    return builder.sign(key, hashes.SHA256())


def _serving_certificate(subject: str, key: PrivateKey, dns_names: tuple[str, ...], ips: tuple[str, ...],
                         ca_cert: x509.Certificate, ca_key: PrivateKey, start: dt.datetime) -> x509.Certificate:
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def ensure_pki(root: Path, now: dt.datetime | None = None) -> Pki:
    """The CA, serving certificate and ServiceAccount key pair under ``root``; made only when missing."""
    pki = Pki(root)
    if all(p.exists() for p in (pki.ca_cert, pki.ca_key, pki.server_cert, pki.server_key, pki.sa_key, pki.sa_pub)):
        return pki
    root.mkdir(parents=True, exist_ok=True)
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)
    ca_key = _key()
    ca_cert = _ca_certificate("muster-local-ca", ca_key, start)
    server_key = _key()
    server_cert = _serving_certificate("kube-apiserver", server_key, API_SERVER_NAMES, API_SERVER_IPS,
                                       ca_cert, ca_key, start)
    sa_key = _key()
    _write_key(pki.ca_key, ca_key)
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.server_key, server_key)
    pki.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki


@dataclass(frozen=True)
class WebhookPki:
    """A controller's webhook CA (``ca.crt``/``ca.key``) and serving pair (``tls.crt``/``tls.key``) under ``root``.

    A CA of its own, never the cluster's: one controller (Trainer) must be handed its CA's key in a
    Secret, and the cluster's CA also vouches for API clients. RSA keys in PKCS#1, the only form the
    cert-controller rotator these controllers link reads from such a Secret.
    """

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def cert(self) -> Path:
        return self.root / "tls.crt"

    @property
    def key(self) -> Path:
        return self.root / "tls.key"


def _names(path: Path) -> tuple[set[str], set[str]]:
    """The DNS names and IP addresses a PEM certificate is for."""
    try:
        sans = x509.load_pem_x509_certificate(path.read_bytes()).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return set(), set()
    return set(sans.get_values_for_type(x509.DNSName)), {str(a) for a in sans.get_values_for_type(x509.IPAddress)}


def ensure_webhook_pki(root: Path, ca_name: str, dns_names: tuple[str, ...], ips: tuple[str, ...] = ("127.0.0.1",),
                       now: dt.datetime | None = None) -> WebhookPki:
    """A webhook CA called ``ca_name`` (also its DNS name, as cert-controller checks a CA) and a serving
    certificate for ``dns_names`` and ``ips`` under ``root``; made only when missing or made for others."""
    pki = WebhookPki(root)
    if all(p.exists() for p in (pki.ca_cert, pki.ca_key, pki.cert, pki.key)) and \
            _names(pki.ca_cert) == ({ca_name}, set()) and _names(pki.cert) == (set(dns_names), set(ips)):
        return pki
    root.mkdir(parents=True, exist_ok=True)
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_cert = _ca_certificate(ca_name, ca_key, start, dns_names=(ca_name,))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = _serving_certificate(dns_names[0] if dns_names else ips[0], key, dns_names, ips, ca_cert, ca_key, start)
    _write_key(pki.ca_key, ca_key, PKCS1)
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.key, key, PKCS1)
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pki
