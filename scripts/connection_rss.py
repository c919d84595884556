"""RSS of an idle broker with 0 and with N open idle connections.

    python3 scripts/connection_rss.py target/release/broker [port] [connections]
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
port = int(sys.argv[2]) if len(sys.argv) > 2 else 39123
count = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1000), hard))
data = tempfile.mkdtemp()
broker = subprocess.Popen([binary, "start", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                           "--override", f"log.dirs={data}"], stderr=subprocess.DEVNULL)


def rss_kib():
    with open(f"/proc/{broker.pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


try:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.1)
    time.sleep(2)
    idle = rss_kib()
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    time.sleep(2)
    loaded = rss_kib()
    print(f"RSS with 0 connections: {idle} KiB; with {count} open idle connections: {loaded} KiB "
          f"({(loaded - idle) / count:.1f} KiB each); open fds {len(os.listdir(f'/proc/{broker.pid}/fd'))}")
    for s in socks:
        s.close()
finally:
    broker.terminate()
    broker.wait()
