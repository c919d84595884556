"""deploy/: every shipped server.properties starts the broker (its own parser) and serves a
produce and a consume on each of its listeners (TLS ones with certificates made here by the
openssl CLI); dev-cluster.sh starts 3 brokers a client reaches and stops them all; the systemd
unit parses and has the settings the deployment relies on; the Dockerfile copies files that
exist (the image itself is not built here: no Docker daemon or registry in the test
environment).

Only the data directory, the listeners' ports and the certificate paths are overridden, so
every other key of each file goes through the broker's parser as shipped.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BROKER_BIN, REPO, Broker, free_port, port_open
from e2e_helpers import ck_consume, ck_produce, ck_producer, unique

DEPLOY = REPO / "deploy"
PROPERTIES = sorted(DEPLOY.rglob("*.properties"))
UNIT = DEPLOY / "systemd" / "kafka-tpc.service"
DEV_CLUSTER = DEPLOY / "dev-cluster.sh"
CLUSTER_SIZE = 3
SCRIPT_TIMEOUT = 90


def read_properties(path):
    """Kafka .properties subset the deploy files use: key=value lines, # comments."""
    out = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """CA, server keystore (key + chain, one PEM, SAN 127.0.0.1), client key and certificate:
    the commands deploy/README.md documents."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed: cannot make the TLS example's certificates")
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=kafka-tpc-test-ca", cwd=d)
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
            cwd=d)
    (d / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out",
            "client.csr", "-subj", "/CN=client", cwd=d)
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "client.pem", "-days", "2", "-extfile", "client.ext",
            cwd=d)
    (d / "server.keystore.pem").write_text(
        (d / "server.key").read_text() + (d / "server.pem").read_text())
    return d


def roundtrip(bootstrap, **client_conf):
    """Produces one record to a new (auto-created) topic and consumes it back."""
    topic = unique("deploy")
    key, value = b"k", f"through {bootstrap}".encode()
    producer = ck_producer(bootstrap, **client_conf)
    log = ck_produce(producer, topic, [{"key": key, "value": value}], flush_timeout=60)
    assert not log.errors, log.errors
    assert len(log.ok) == 1
    got, errors = ck_consume(bootstrap, topic, 1, 1, timeout=60, linger=0, **client_conf)
    assert not errors, errors
    assert [(r.key, r.value) for r in got[0]] == [(key, value)], got


def test_deploy_ships_configs():
    names = {p.name for p in PROPERTIES}
    assert {"single-node.properties", "tls.properties"} <= names, names


@pytest.mark.parametrize("path", PROPERTIES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_properties_file_starts_broker(path, tmp_path, request):
    props = read_properties(path)
    listeners = [entry.split("://", 1)[0] for entry in props["listeners"].split(",")]
    protocols = dict(pair.split(":", 1) for pair in props.get(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL").split(","))
    ports = {name: free_port() for name in listeners}
    overrides = {
        "log.dirs": str(tmp_path / "data"),
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        # A shared 2-core test machine: every file's num.shards goes through the parser, but
        # the run uses 2 shards (0 would also mean 2 here).
        "num.shards": "2",
    }
    ssl_conf = {}
    if any(protocols.get(n) == "SSL" for n in listeners):
        pki = request.getfixturevalue("pki")
        overrides["ssl.keystore.location"] = str(pki / "server.keystore.pem")
        overrides["ssl.truststore.location"] = str(pki / "ca.pem")
        ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem"),
                    "ssl.certificate.location": str(pki / "client.pem"),
                    "ssl.key.location": str(pki / "client.key")}
    broker = Broker(tmp_path / "broker", overrides=overrides, config_file=path,
                    port=ports[listeners[0]])
    request.node._e2e_brokers = [broker]
    broker.start()
    try:
        out = broker.output()
        # Every key of a shipped example is one the broker uses.
        assert "accepted but not used" not in out, out
        for name in listeners:
            conf = ssl_conf if protocols.get(name) == "SSL" else {}
            roundtrip(f"127.0.0.1:{ports[name]}", **conf)
    finally:
        rc = broker.stop()
    assert rc == 0, f"broker exited with {rc} after SIGTERM"


def consecutive_free_ports(n, attempts=50):
    for _ in range(attempts):
        base = free_port()
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError(f"no {n} consecutive free ports found")


def cluster(*args, env):
    return subprocess.run([str(DEV_CLUSTER), *args], env=env, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by init) has exited.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_dev_cluster_starts_and_stops_three_brokers(tmp_path):
    base = tmp_path / "dev"
    base_port = consecutive_free_ports(CLUSTER_SIZE)
    env = dict(os.environ, BROKER_BIN=BROKER_BIN, BASE_PORT=str(base_port), NO_COLOR="1")
    pids = []
    try:
        r = cluster("start", str(CLUSTER_SIZE), str(base), env=env)
        assert r.returncode == 0, f"start failed:\n{r.stdout}\n{r.stderr}"
        addresses = re.findall(r"^broker (\d+): (127\.0\.0\.1:\d+) \(pid (\d+)", r.stdout, re.M)
        assert [int(i) for i, _, _ in addresses] == list(range(1, CLUSTER_SIZE + 1)), r.stdout
        pids = [int(pid) for _, _, pid in addresses]
        assert [a for _, a, _ in addresses] == [
            f"127.0.0.1:{base_port + i}" for i in range(CLUSTER_SIZE)]
        assert len({(base / f"broker-{i}" / "data").resolve()
                    for i in range(1, CLUSTER_SIZE + 1)}) == CLUSTER_SIZE
        for _, address, _ in addresses:
            roundtrip(address)
        for i in range(1, CLUSTER_SIZE + 1):
            assert (base / f"broker-{i}" / "data" / "__cluster_metadata-0").is_dir()

        s = cluster("status", str(base), env=env)
        assert s.returncode == 0, s.stdout + s.stderr
        assert s.stdout.count(": running ") == CLUSTER_SIZE, s.stdout

        r = cluster("stop", str(base), env=env)
        assert r.returncode == 0, f"stop failed:\n{r.stdout}\n{r.stderr}"
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"brokers still running after stop: {left}"
        assert not any(port_open(base_port + i) for i in range(CLUSTER_SIZE))
        s = cluster("status", str(base), env=env)
        assert s.returncode != 0 and ": running " not in s.stdout, s.stdout
        for i in range(1, CLUSTER_SIZE + 1):
            log = (base / f"broker-{i}" / "broker.log").read_text()
            assert "INFO broker::server: stopped" in log, log[-2000:]
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def unit_sections(text):
    """systemd unit syntax: [Section], Key=Value (keys may repeat), # and ; comments."""
    sections, current = {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        m = re.fullmatch(r"\[([A-Za-z]+)\]", line)
        if m:
            current = sections.setdefault(m.group(1), {})
            continue
        assert current is not None, f"key outside a section: {raw!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not Key=Value: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_systemd_unit():
    text = UNIT.read_text()
    s = unit_sections(text)
    assert set(s) == {"Unit", "Service", "Install"}, set(s)
    svc = s["Service"]

    def one(key):
        assert key in svc, f"{key} missing from [Service]"
        return svc[key][-1]

    argv = one("ExecStart").split()
    assert argv[1:] == ["start", "--config", "/etc/kafka-tpc/server.properties"], argv
    assert one("LimitMEMLOCK") == "infinity"
    assert int(one("LimitNOFILE")) >= 65536
    assert one("Restart") == "on-failure"
    assert one("RestartSec")
    assert one("KillSignal") == "SIGTERM"
    assert one("TimeoutStopSec")
    assert one("User") and one("User") != "root"
    assert one("StateDirectory")
    assert one("WorkingDirectory") == f"/var/lib/{one('StateDirectory')}"
    assert re.search(r"^#\s*CPUAffinity=", text, re.M), "commented CPUAffinity example missing"
    assert s["Install"]["WantedBy"] == ["multi-user.target"]

    # The command the unit runs is one the binary accepts.
    help_out = subprocess.run([BROKER_BIN, "start", "--help"], capture_output=True, text=True)
    assert help_out.returncode == 0 and "--config" in help_out.stdout, help_out

    if shutil.which("systemd-analyze") is None:
        print("systemd-analyze not installed: unit checked by the ini parse only")
        return
    with_bin = Path(os.environ.get("TMPDIR", "/tmp")) / f"kafka-tpc-{os.getpid()}"
    with_bin.mkdir(exist_ok=True)
    unit = with_bin / "kafka-tpc.service"
    # verify insists that ExecStart's binary exists: point it at the one under test.
    unit.write_text(text.replace(argv[0], str(Path(BROKER_BIN).resolve())))
    try:
        r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                           text=True, timeout=60)
    finally:
        shutil.rmtree(with_bin, ignore_errors=True)
    complaints = [line for line in (r.stdout + r.stderr).splitlines()
                  if "kafka-tpc.service" in line]
    assert r.returncode == 0 and not complaints, r.stdout + r.stderr


def test_dockerfile_copies_existing_files():
    text = (DEPLOY / "Dockerfile").read_text()
    copies = re.findall(r"^COPY\s+(?!--from)(\S+)\s+\S+", text, re.M)
    assert copies, "no COPY from the build context"
    for src in copies:
        assert (REPO / src).exists(), f"Dockerfile copies {src}, which is not in the repository"
    assert re.search(r"^USER\s+(?!root\b)\S+", text, re.M), "image must not run as root"
    assert re.search(r"^VOLUME\s", text, re.M)
