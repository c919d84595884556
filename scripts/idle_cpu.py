"""Idle CPU of a broker holding 5,000 partitions (PARTS to change): utime+stime from
/proc/<pid>/stat over 20 s. Usage: python scripts/idle_cpu.py BROKER_BIN LABEL (the venv with
confluent-kafka, e.g. target/venv/bin/python)."""
import os, socket, subprocess, sys, tempfile, time
from confluent_kafka.admin import AdminClient, NewTopic

binary, label = sys.argv[1], sys.argv[2]
PARTITIONS = int(os.environ.get("PARTS", "5000"))
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
port = free_port()
data = tempfile.mkdtemp(prefix="hm_idle_")
log = open(f"/tmp/hm_idle_{label}.log", "w")
proc = subprocess.Popen([binary, "start", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                         "--override", f"log.dirs={data}", "--override", "num.shards=2"],
                        stdout=log, stderr=subprocess.STDOUT)
try:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
        except OSError:
            assert time.monotonic() < deadline; time.sleep(0.2)
    a = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    t0 = time.monotonic()
    a.create_topics([NewTopic("idle", num_partitions=PARTITIONS, replication_factor=1)],
                    request_timeout=300)["idle"].result(timeout=300)
    while len(a.list_topics(topic="idle", timeout=30).topics["idle"].partitions) < PARTITIONS:
        time.sleep(0.5)
    created = time.monotonic() - t0
    time.sleep(5)
    tick = os.sysconf("SC_CLK_TCK")
    def cpu():
        f = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / tick
    c0, w0 = cpu(), time.monotonic()
    time.sleep(20)
    c1, w1 = cpu(), time.monotonic()
    dirs = len([d for d in os.listdir(data) if d.startswith("idle-")])
    print(f"{label}: {dirs} partition dirs (created in {created:.1f} s); idle CPU over {w1-w0:.1f} s: "
          f"{c1-c0:.2f} s = {100*(c1-c0)/(w1-w0):.2f} % of one core")
finally:
    proc.terminate(); proc.wait(timeout=60)
    subprocess.run(["rm", "-rf", data])
