"""Real local HTTP(S) servers for the fetch tests: answering, slow, hanging, huge, redirecting, failing.

`LocalServer(tls=None, host="127.0.0.1")` serves on that address (`"::1"` for IPv6) at a free port; `TestCA` makes a CA and a server
certificate with `cryptography`, so HTTPS is verified against a CA only the test trusts.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class TestCA:
    __test__ = False  # not a test class

    def __init__(self, tmp: Path, names: tuple[str, ...] = ("localhost", "api.test")) -> None:
        now = dt.datetime.now(dt.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Almanac test CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
              .not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                .sign(ca_key, hashes.SHA256()))
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM).decode()
        self.cert_file, self.key_file = tmp / "server.pem", tmp / "server.key"
        self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem)


class LocalServer:
    """Paths: /json, /status/N, /slow (0.3 s), /hang (until close), /huge/N (N bytes), /echo (the request),
    /redirect?to=URL&code=N, /loop (redirects to itself for ever)."""

    def __init__(self, tls: TestCA | None = None, host: str = "127.0.0.1") -> None:
        self.release = threading.Event()
        self.seen: list[dict[str, Any]] = []
        self.routes: dict[str, tuple[int, Any]] = {}  # path -> (status, JSON body): a test's own answers
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {"content-type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
                server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                    "body": body.decode("utf-8", "replace")})
                if path in server.routes:
                    status, answer = server.routes[path]
                    self._answer(status, json.dumps(answer).encode())
                elif path == "/json":
                    self._answer(200, json.dumps({"rates": {"USD": 1.08}}).encode(), {"x-answer": "yes"})
                elif path.startswith("/status/"):
                    self._answer(int(path.rsplit("/", 1)[1]), b'{"error": "no"}')
                elif path == "/slow":
                    time.sleep(0.3)
                    self._answer(200, b'"slow but here"')
                elif path == "/hang":
                    server.release.wait(60)
                elif path.startswith("/huge/"):
                    self._answer(200, b"x" * int(path.rsplit("/", 1)[1]), {"content-type": "text/plain"})
                elif path == "/echo":
                    self._answer(200, json.dumps(server.seen[-1]).encode())
                elif path == "/redirect":
                    from urllib.parse import unquote
                    self._answer(int(params.get("code", "302")), b"", {"location": unquote(params["to"])})
                elif path == "/loop":
                    self._answer(302, b"", {"location": "/loop"})
                else:
                    self._answer(404, b"{}")

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
        self.httpd = server_class((host, 0), Handler)
        self.host = host
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.server_context().wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str | None = None) -> str:
        host = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"{self.scheme}://{host}:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6
