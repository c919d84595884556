"""The README's TLS listener command exactly as written there: its arguments are read from the
README's "TLS listeners" section (after `cargo run --release -p broker --`, the release binary
stands in for cargo), run from a fresh working directory holding the `server.pem` (key and
chain) and `ca.pem` it names. Then librdkafka with a client certificate produces and consumes
over SSL, a client without one is refused (`ssl.client.auth=required`), and the PLAINTEXT
listener serves beside it.

Skipped (with the reason printed) only when something else already listens on 9092 or 9093.
"""

import re
import shlex
from pathlib import Path

import pytest

from conftest import broker_as_typed, wait_port_free
from e2e_helpers import ck_consume, ck_consumer, ck_produce, ck_producer
from test_tls import api_versions_over, ck_ssl, client_context, pki  # noqa: F401 (fixture)

# Both README tests need ports 9092 and 9093: one xdist worker runs them, one after the other.
pytestmark = pytest.mark.xdist_group("readme-ports")

README = Path(__file__).resolve().parents[2] / "README.md"
CARGO_PREFIX = ["cargo", "run", "--release", "-p", "broker", "--"]
N = 100


def readme_tls_command():
    """The argument list of the first code block of the README's TLS section."""
    text = README.read_text()
    section = text.split("## TLS listeners", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    words = shlex.split(block.replace("\\\n", " "))
    assert words[:len(CARGO_PREFIX)] == CARGO_PREFIX, words
    return words[len(CARGO_PREFIX):]


def test_readme_names_the_files_and_ports():
    args = readme_tls_command()
    joined = " ".join(args)
    for needed in ("start", "PLAINTEXT://127.0.0.1:9092", "SSL://127.0.0.1:9093",
                   "ssl.keystore.location=server.pem", "ssl.truststore.location=ca.pem",
                   "ssl.client.auth=required"):
        assert needed in joined, (needed, args)


@pytest.fixture
def readme_tls_broker(tmp_path, pki):  # noqa: F811 (fixture from test_tls)
    for port in (9092, 9093):
        owner = wait_port_free(port)
        if owner:
            pytest.skip(f"port {port} is taken by another process ({owner}); the README TLS "
                        "test needs it")
    workdir = tmp_path / "fresh-clone"
    workdir.mkdir()
    (workdir / "server.pem").write_text((pki / "keystore.pem").read_text())
    (workdir / "ca.pem").write_text((pki / "ca.pem").read_text())
    log_path = tmp_path / "broker.stderr.log"
    with broker_as_typed(readme_tls_command(), workdir, log_path, [9092, 9093]) as proc:
        yield proc, log_path


def test_readme_tls_command_serves_ssl_and_plaintext(readme_tls_broker, pki):  # noqa: F811
    proc, log_path = readme_tls_broker
    ssl_conf = ck_ssl(pki)
    values = [f"readme-tls-{i}".encode() for i in range(N)]
    producer = ck_producer("127.0.0.1:9093", **ssl_conf)
    log = ck_produce(producer, "readme-tls", (dict(value=v) for v in values))
    assert not log.errors and len(log.ok) == N, log.errors[:3]
    consumed, _ = ck_consume("127.0.0.1:9093", "readme-tls", 1, N, **ssl_conf)
    assert [rec.value for rec in consumed[0]] == values

    # The PLAINTEXT listener beside it serves the same topic.
    consumed, _ = ck_consume("127.0.0.1:9092", "readme-tls", 1, N)
    assert [rec.value for rec in consumed[0]] == values

    # ssl.client.auth=required: no certificate, no service.
    with pytest.raises((OSError, ConnectionError)):
        api_versions_over(9093, client_context(pki, cert=False))
    c = ck_consumer("127.0.0.1:9093", **ck_ssl(pki, cert=False))
    try:
        with pytest.raises(Exception):
            c.list_topics(timeout=3)
    finally:
        c.close()
    assert proc.poll() is None, log_path.read_text()
    assert "TLS handshake failed; connection closed" in log_path.read_text()
