"""A private certificate authority made by a test, as a company's or an on-premise store's is:
a CA certificate no system trusts, and a server certificate it signed for ``127.0.0.1`` and
``localhost``. `LatencyProxy(..., tls=ca.server_context())` puts any plain server on loopback
behind TLS with it.

    ca = PrivateCa(tmp_path)
    with LatencyProxy("127.0.0.1", server.port, tls=ca.server_context()) as proxy:
        ... https://127.0.0.1:{proxy.address[1]}/ trusted with ca_bundle=ca.ca_file ...
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import subprocess
from pathlib import Path

__all__ = ["PrivateCa"]


class PrivateCa:
    """A CA and one server certificate it signed, written as PEM files under ``folder``.

    Args:
        folder: Where ``ca.pem``, ``server.pem`` and ``server.key`` are written.
        name: The CA's common name.

    Attributes:
        ca_file: The CA's certificate (what ``ca_bundle=`` and ``SSL_CERT_FILE`` name).
        certificate_file: The server's certificate chain.
        key_file: The server's private key.
    """

    def __init__(self, folder: Path, name: str = "stoker test CA") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        folder.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=7))
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0])
            .not_valid_after(valid[1])
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        server = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0])
            .not_valid_after(valid[1])
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_file = folder / "ca.pem"
        self.certificate_file = folder / "server.pem"
        self.key_file = folder / "server.key"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.certificate_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )

    def server_context(self) -> ssl.SSLContext:
        """A server's TLS context with the certificate the CA signed."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certificate_file, self.key_file)
        return context

    def hashed_folder(self, folder: Path) -> Path:
        """``folder`` holding the CA's certificate under its hashed name, as ``SSL_CERT_DIR``
        wants it (``openssl rehash``).

        Raises:
            FileNotFoundError: No ``openssl`` command here.
        """
        openssl = shutil.which("openssl")
        if openssl is None:
            raise FileNotFoundError("openssl (the command) names a certificate folder's files")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.ca_file, folder / "ca.pem")
        subprocess.run([openssl, "rehash", str(folder)], check=True, capture_output=True)
        return folder
