"""Real Debian servers nobody here tuned heapscope for, whose heaps are held through interior pointers: intrusive
lists (a list head embedded in each object, reached by container_of), embedded structures and pools of slots.
Each server is started on 127.0.0.1 with a private configuration in a scratch directory, loaded a little over
its own protocol, its core taken while it runs (gdb's gcore), and stopped. Then:

  - heapscope's possibly-leaked bytes (`leaks`: reachable only through interior pointers) are under 5% of the
    bytes in use (`summary`: in_use and mmapped), and heapscope calls nothing definitely leaked: valgrind's
    memcheck, attached to the same servers under the same load (vgdb leak_check), finds nothing definitely lost;
  - one cross-check against the server's own counters, read over its own protocol just before the core:
      memcached    `stats`: curr_items are the keys set; total_malloced bytes of 1 MiB slab pages (its items are
                   carved out of them) are all in blocks heapscope calls reachable, not possibly leaked;
      nginx        stub_status: the connections held are active, and each one's connection pool
                   (connection_pool_size 512: 520 usable bytes) is a block heapscope calls reachable;
      mosquitto    $SYS/broker/...: the retained messages are there, and heap/current (mosquitto's own sum of the
                   usable sizes of what it allocated) is at most what heapscope calls reachable;
      haproxy      `show info` / `show pools` on its stats socket: CurrConns are the connections held, and the
                   stream pool's objects in use are blocks heapscope calls reachable.

nginx keeps its whole heap behind one interior pointer: the global ngx_cycle points 80 bytes into the 16 KiB
pool block it was allocated from (past the ngx_pool_t header), and the connection array, the event arrays
and every connection's pool hang from that block; memcheck calls all of it possibly lost too. The others hold
their objects from their starts as well, and are here so that a new idiom does not turn what is reachable
into a leak.

A program whose package is not installed skips with a line saying which. Run through ctest like the other
end-to-end tests, or directly (python3 -m pytest test_real_intrusive.py): then the heapscope on PATH is used
and a scratch work directory is made."""

import atexit
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

# Run directly (not through ctest, which sets these): the installed CLI, a scratch directory, and no index
# cache, as tests/CMakeLists.txt sets them.
if not os.environ.get("HEAPSCOPE") and shutil.which("heapscope"):
    os.environ["HEAPSCOPE"] = shutil.which("heapscope")
if not os.environ.get("HEAPSCOPE_WORK_DIR"):
    os.environ["HEAPSCOPE_WORK_DIR"] = tempfile.mkdtemp(prefix="heapscope-e2e-intrusive-")
    atexit.register(shutil.rmtree, os.environ["HEAPSCOPE_WORK_DIR"], True)
os.environ.setdefault("HEAPSCOPE_NO_CACHE", "1")

from heapscope_e2e import USED_STATES, RemovesItsCore, heapscope_json, work_dir  # noqa: E402
from test_attach import take_core  # noqa: E402
from test_real_programs import free_port  # noqa: E402
from lldb_session import require_lldb_and_gdb, run_lldb  # noqa: E402
from test_gdb import json_between_markers, marked, run_gdb  # noqa: E402


def without_warnings(report):
    """A report without its warnings, which name the frontend's image source."""
    return {key: value for key, value in report.items() if key != "warnings"}

MEMCACHED = "/usr/bin/memcached"
NGINX = "/usr/sbin/nginx"
MOSQUITTO = "/usr/sbin/mosquitto"
HAPROXY = "/usr/sbin/haproxy"
START_TIMEOUT_SECONDS = 30
LOAD_TIMEOUT_SECONDS = 30
STOP_TIMEOUT_SECONDS = 10
POSSIBLY_SHARE_LIMIT = 0.05

MEMCACHED_KEYS = 20_000
MEMCACHED_SLAB_PAGE = 1 << 20  # memcached's default -I (item size max) and slab page size
NGINX_CONNECTIONS = 400
NGINX_CONNECTION_POOL_USABLE = 520  # connection_pool_size 512 below: posix_memalign(16, 512), usable 520
MOSQUITTO_TOPICS = 10_000
MOSQUITTO_CLIENTS = 200
HAPROXY_IDLE = 200  # keep-alive connections answered and idle
HAPROXY_PENDING = 200  # requests forwarded to a backend that never answers: a stream and two connections each


def wait_for_port(server, port, name):
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if server.poll() is not None:
            raise AssertionError(f"{name} exited {server.returncode} before listening on {port}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not listen on {port} within {START_TIMEOUT_SECONDS} s")
        time.sleep(0.1)


def stop(server):
    """SIGTERM, as a service manager stops it; SIGKILL if it lingers."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def receive_until(sock, done, deadline):
    data = b""
    while not done(data):
        if time.monotonic() > deadline:
            raise AssertionError(f"no complete answer in time: {data[-300:]!r}")
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed: {data[-300:]!r}")
        data += chunk
    return data


def http_get(port, path, deadline):
    """A keep-alive connection that asked for `path` and read its whole (short, Content-Length) answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path)

    def complete(data):
        head, separator, body = data.partition(b"\r\n\r\n")
        if not separator:
            return False
        length = [line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        return len(body) >= int(length[0]) if length else False

    return sock, receive_until(sock, complete, deadline)


class LoadedServerCore(RemovesItsCore):
    """setUpClass: a scratch directory, the server started, loaded and its own figures read (start_and_load,
    which returns the server's pid and leaves what must stay open on `held`), the core taken at that moment,
    the server stopped, then heapscope's summary, leaks and reachable blocks of the core."""

    name = None

    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix=f"{cls.name}-", dir=work_dir())
        cls.core = os.path.join(work_dir(), f"{cls.name}-intrusive.core")
        with contextlib.ExitStack() as held:
            take_core(cls.start_and_load(held), cls.core)
        cls.summary = heapscope_json("summary", cls.core)
        cls.leaks = heapscope_json("leaks", cls.core)
        cls.reachable = heapscope_json("blocks", cls.core, "--state", "reachable")["blocks"]

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    @classmethod
    def write_config(cls, name, text):
        """The server's configuration file `name` in the scratch directory, holding `text`; its path."""
        path = os.path.join(cls.scratch, name)
        with open(path, "w", encoding="ascii") as f:
            f.write(text)
        return path

    @classmethod
    def start(cls, held, argv, port):
        with open(os.path.join(cls.scratch, "stderr"), "wb") as stderr:
            server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                      cwd=cls.scratch)
        held.callback(server.wait)
        held.callback(stop, server)
        wait_for_port(server, port, cls.name)
        return server

    def in_use_bytes(self):
        return sum(self.summary["heap"]["totals"][state]["bytes"] for state in USED_STATES)

    def held_from_a_start(self):
        """The blocks heapscope calls reachable, not only through interior pointers."""
        return [b for b in self.reachable if not b["possibly"]]

    def test_possibly_leaked_bytes_are_under_5_percent_of_the_bytes_in_use(self):
        possibly, in_use = self.leaks["totals"]["possibly"], self.in_use_bytes()
        self.assertGreater(in_use, 0)
        self.assertLess(possibly["bytes"], POSSIBLY_SHARE_LIMIT * in_use,
                        f"{self.name}: {possibly['blocks']} blocks, {possibly['bytes']} bytes possibly leaked of "
                        f"{in_use} bytes in use ({100 * possibly['bytes'] / in_use:.1f}%)")

    def test_each_suspects_path_starts_at_the_owner_its_header_names(self):
        for suspect in heapscope_json("top", self.core, "-n", "1")["suspects"]:
            holder, path = suspect["holder"], suspect.get("path")
            if holder["kind"] != "root" or not path:
                continue
            with self.subTest(holder=holder["label"]):
                if holder["root_kind"] == "global":
                    self.assertEqual(path["root"]["kind"], "global", path["root"])
                    self.assertIn(holder["module"], path["root"]["label"])
                elif holder["tid"]:
                    self.assertIn(f"(tid {holder['tid']})", path["root"]["label"])

    def test_each_owner_kinds_rows_add_up_to_it(self):
        """What each owner keeps alive alone, and what several owners of its kind keep together, is the kind's
        total: nothing is left unaccounted for."""
        roots = heapscope_json("roots", self.core, "-n", "0")
        owners = {}
        for row in roots["roots"]:
            if row["depth"] == 0:
                owners.setdefault(row["kind"], []).append(row)
        for kind in roots["kinds"]:
            with self.subTest(kind=kind["kind"]):
                alone = sum(row["retained_bytes"] for row in owners.get(kind["kind"], []))
                self.assertEqual(alone + kind["together"]["retained_bytes"], kind["retained_bytes"], kind)

    def test_nothing_is_definitely_leaked(self):
        # memcheck attached to the running server under this load (vgdb leak_check) finds 0 bytes definitely
        # and indirectly lost in each of these servers.
        self.assertEqual(self.leaks["totals"]["blocks"], 0, self.leaks["totals"])


# ---- memcached: items carved out of 1 MiB slab pages, linked by their LRU and hash chain pointers ----

@unittest.skipUnless(os.access(MEMCACHED, os.X_OK), "memcached is not installed (apt-get install memcached)")
class MemcachedSlabs(LoadedServerCore, unittest.TestCase):
    name = "memcached"

    @classmethod
    def start_and_load(cls, held):
        port = free_port()
        server = cls.start(held, [MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "64",
                                  "-c", "256", "-u", "root"], port)
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for first in range(0, MEMCACHED_KEYS, 500):
                batch = []
                for i in range(first, min(first + 500, MEMCACHED_KEYS)):
                    value = b"value-%08d" % i * 8
                    batch.append(b"set key:%08d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
                sock.sendall(b"".join(batch))
                answer = receive_until(sock, lambda data, n=len(batch): data.count(b"\r\n") >= n, deadline)
                if answer.count(b"STORED\r\n") != len(batch):
                    raise AssertionError(f"memcached did not store every key: {answer[:300]!r}")
            stats = ""
            for command in (b"stats\r\n", b"stats slabs\r\n"):  # curr_items; total_malloced
                sock.sendall(command)
                stats += receive_until(sock, lambda data: data.endswith(b"END\r\n"), deadline).decode()
        cls.stats = {fields[1]: fields[2] for fields in (line.split() for line in stats.splitlines())
                     if len(fields) == 3 and fields[0] == "STAT"}
        return server.pid

    def test_the_slab_pages_holding_the_items_are_reachable(self):
        self.assertEqual(int(self.stats["curr_items"]), MEMCACHED_KEYS)
        malloced = int(self.stats["total_malloced"])
        self.assertGreaterEqual(malloced, MEMCACHED_SLAB_PAGE)
        pages = [b for b in self.held_from_a_start() if b["usable_size"] >= MEMCACHED_SLAB_PAGE]
        self.assertGreaterEqual(len(pages) * MEMCACHED_SLAB_PAGE, malloced,
                                f"{len(pages)} reachable blocks of 1 MiB or more; memcached malloc'd {malloced} "
                                f"bytes of slab pages")

    def test_a_slab_pages_retainers_prefer_start_pointers_and_give_the_paths_asked_for(self):
        """A slab page is pointed into by its items' neighbours and hash chains everywhere, and held from its
        start by memcached's slab list (a global → the list's block → the page): that path comes first, and
        --paths N gives N distinct paths, each from its own root or through its own first block."""
        page = next(b for b in self.held_from_a_start() if b["usable_size"] >= MEMCACHED_SLAB_PAGE)
        retainers = heapscope_json("retainers", self.core, hex(page["address"]), "--paths", "6")
        first = retainers["paths"][0]
        self.assertEqual([step["into"] for step in first["steps"]], [0] * len(first["steps"]), first)
        self.assertEqual(len(retainers["paths"]), 6)
        starts = {(p["root"]["label"], p["steps"][0]["address"]) for p in retainers["paths"]}
        self.assertEqual(len(starts), 6, retainers["paths"])


# ---- nginx: a region allocator (ngx_pool_t headers in front), connection and event slot arrays, ngx_queue_t ----

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log {scratch}/error.log;
pid {scratch}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {scratch}/body;
  proxy_temp_path {scratch}/proxy;
  fastcgi_temp_path {scratch}/fastcgi;
  uwsgi_temp_path {scratch}/uwsgi;
  scgi_temp_path {scratch}/scgi;
  connection_pool_size 512;
  keepalive_timeout 300s;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port};
    location = /status {{ stub_status; }}
    location / {{ return 200 "hello\\n"; }}
  }}
}}
"""


@unittest.skipUnless(os.access(NGINX, os.X_OK), "nginx is not installed (apt-get install nginx-light)")
class NginxKeepAliveConnections(LoadedServerCore, unittest.TestCase):
    name = "nginx"

    @classmethod
    def start_and_load(cls, held):
        port = free_port()
        conf = cls.write_config("nginx.conf", NGINX_CONF.format(scratch=cls.scratch, port=port))
        server = cls.start(held, [NGINX, "-p", cls.scratch, "-c", conf, "-e", os.path.join(cls.scratch, "error.log")],
                           port)
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        for i in range(NGINX_CONNECTIONS):
            sock, answer = http_get(port, b"/page%d" % i, deadline)
            held.callback(sock.close)
            if b" 200 " not in answer.split(b"\r\n", 1)[0]:
                raise AssertionError(f"nginx answered {answer[:200]!r}")
        status_sock, status = http_get(port, b"/status", deadline)
        held.callback(status_sock.close)
        cls.active = int(status.split(b"Active connections:")[1].split()[0])
        return server.pid

    def test_every_held_connections_pool_is_reachable(self):
        # The keep-alive connections and the one that asked for the status.
        self.assertEqual(self.active, NGINX_CONNECTIONS + 1)
        pools = [b for b in self.held_from_a_start() if b["usable_size"] == NGINX_CONNECTION_POOL_USABLE]
        self.assertGreaterEqual(len(pools), self.active,
                                f"{len(pools)} reachable blocks of {NGINX_CONNECTION_POOL_USABLE} bytes (connection "
                                f"pools) for {self.active} active connections")

    def test_lldb_and_gdb_give_the_clis_roots(self):
        """The owners and what each retains are the same whichever frontend reads the core."""
        require_lldb_and_gdb()
        cli = heapscope_json("roots", self.core)
        lldb = run_lldb([f"target create {NGINX} --core {self.core}", "heap roots --json"])
        self.assertEqual(without_warnings(lldb.json_of("heap roots --json")), without_warnings(cli))
        gdb = run_gdb(marked("roots", "heap roots --json"), NGINX, self.core)
        self.assertEqual(without_warnings(json_between_markers(gdb, "roots")), without_warnings(cli))


# ---- mosquitto: a topic tree of uthash tables (UT_hash_handle embedded in each node), clients, retained messages ----

def mqtt_varlen(n):
    out = b""
    while True:
        digit, n = n % 128, n // 128
        out += bytes([digit | (0x80 if n else 0)])
        if not n:
            return out


def mqtt_string(text):
    return struct.pack(">H", len(text)) + text


def mqtt_packet(kind, body):
    return bytes([kind]) + mqtt_varlen(len(body)) + body


def mqtt_connect(port, client_id):
    """An MQTT 3.1.1 connection (clean session, keep-alive 600 s) that got its CONNACK."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(mqtt_packet(0x10, mqtt_string(b"MQTT") + b"\x04\x02" + struct.pack(">H", 600) + mqtt_string(client_id)))
    ack = sock.recv(4)
    if ack[:2] != b"\x20\x02" or ack[3:4] != b"\x00":
        raise AssertionError(f"mosquitto refused {client_id!r}: {ack!r}")
    return sock


def mqtt_subscribe(sock, packet_id, topic_filter, deadline):
    sock.sendall(mqtt_packet(0x82, struct.pack(">H", packet_id) + mqtt_string(topic_filter) + b"\x01"))
    return receive_until(sock, lambda data: len(data) >= 5, deadline)


def mqtt_publishes(data):
    """(topic, payload) of each whole PUBLISH (QoS 0) in `data`, and the bytes left after them."""
    out = []
    while len(data) >= 2:
        length, multiplier, index = 0, 1, 1
        while index < len(data):
            length += (data[index] & 0x7F) * multiplier
            multiplier *= 128
            index += 1
            if not data[index - 1] & 0x80:
                break
        else:
            break
        if len(data) < index + length:
            break
        body, kind, data = data[index:index + length], data[0], data[index + length:]
        if kind >> 4 == 3:
            topic_length = struct.unpack(">H", body[:2])[0]
            out.append((body[2:2 + topic_length], body[2 + topic_length:]))
    return out, data


MOSQUITTO_CONF = """
listener {port} 127.0.0.1
allow_anonymous true
persistence false
sys_interval 1
log_dest stderr
log_type error
"""
MOSQUITTO_SYS = (b"$SYS/broker/retained messages/count", b"$SYS/broker/heap/current", b"$SYS/broker/clients/connected")


@unittest.skipUnless(os.access(MOSQUITTO, os.X_OK), "mosquitto is not installed (apt-get install mosquitto)")
class MosquittoRetainedAndClients(LoadedServerCore, unittest.TestCase):
    name = "mosquitto"

    @classmethod
    def start_and_load(cls, held):
        port = free_port()
        conf = cls.write_config("mosquitto.conf", MOSQUITTO_CONF.format(port=port))
        server = cls.start(held, [MOSQUITTO, "-c", conf], port)
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        loader = mqtt_connect(port, b"loader")
        held.callback(loader.close)
        for i in range(MOSQUITTO_TOPICS):  # one retained QoS 0 message per topic, three levels deep
            loader.sendall(mqtt_packet(0x31, mqtt_string(b"load/t%d/v%d" % (i % 100, i)) + b"payload-%08d" % i))
        for c in range(MOSQUITTO_CLIENTS):  # each client with a subscription of its own
            sock = mqtt_connect(port, b"client-%05d" % c)
            held.callback(sock.close)
            if mqtt_subscribe(sock, 1, b"sub/%d/#" % c, deadline)[0] != 0x90:
                raise AssertionError("mosquitto did not acknowledge a subscription")
        loader.sendall(b"\xc0\x00")  # PINGREQ, answered after every PUBLISH before it
        if receive_until(loader, lambda data: len(data) >= 2, deadline) != b"\xd0\x00":
            raise AssertionError("mosquitto did not answer PINGREQ")
        # Its own figures, republished (retained) every sys_interval: read until they count the load.
        watcher = mqtt_connect(port, b"watcher")
        held.callback(watcher.close)
        for number, topic in enumerate(MOSQUITTO_SYS, 1):
            watcher.sendall(mqtt_packet(0x82, struct.pack(">H", number) + mqtt_string(topic) + b"\x00"))
        cls.figures, pending = {}, b""
        # heap/current too is waited for until it counts the load (more than a MiB): a first $SYS publish
        # may predate it.
        while (int(cls.figures.get(MOSQUITTO_SYS[0], 0)) < MOSQUITTO_TOPICS
               or int(cls.figures.get(MOSQUITTO_SYS[2], 0)) < MOSQUITTO_CLIENTS + 2
               or int(cls.figures.get(MOSQUITTO_SYS[1], 0)) <= 1 << 20):
            if time.monotonic() > deadline:
                raise AssertionError(f"mosquitto's $SYS figures did not count the load: {cls.figures}")
            publishes, pending = mqtt_publishes(pending + watcher.recv(65536))
            cls.figures.update(publishes)
        return server.pid

    def test_mosquittos_own_heap_is_reachable(self):
        self.assertGreaterEqual(int(self.figures[MOSQUITTO_SYS[0]]), MOSQUITTO_TOPICS)
        # heap/current: the usable sizes of what mosquitto allocated and has not freed (its memory tracking),
        # read at most a second before the core; a part of the heap, all of it reachable.
        own = int(self.figures[MOSQUITTO_SYS[1]])
        reachable = sum(b["usable_size"] for b in self.held_from_a_start())
        self.assertGreater(own, 1 << 20)
        self.assertLessEqual(own, reachable)


# ---- haproxy: struct list heads embedded in streams, sessions, connections (LIST_ELEM, container_of), pools ----

HAPROXY_CFG = """
global
  nbthread 1
  maxconn 4000
  stats socket {scratch}/admin.sock mode 600 level admin
defaults
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  timeout http-keep-alive 300s
  timeout http-request 300s
frontend fe
  mode http
  bind 127.0.0.1:{port}
  http-request return status 200 content-type text/plain string "hello" if {{ path_beg /idle }}
  default_backend sinkhole
backend sinkhole
  mode http
  server sink 127.0.0.1:{sink_port}
frontend sink
  mode tcp
  bind 127.0.0.1:{sink_port}
  tcp-request inspect-delay 300s
  tcp-request content accept if WAIT_END
"""


def haproxy_command(socket_path, command):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(socket_path)
        sock.sendall(command + b"\n")
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out.decode()


@unittest.skipUnless(os.access(HAPROXY, os.X_OK), "haproxy is not installed (apt-get install haproxy)")
class HaproxyStreams(LoadedServerCore, unittest.TestCase):
    name = "haproxy"

    @classmethod
    def start_and_load(cls, held):
        port, sink_port = free_port(), free_port()
        cfg = cls.write_config("haproxy.cfg", HAPROXY_CFG.format(scratch=cls.scratch, port=port, sink_port=sink_port))
        server = cls.start(held, [HAPROXY, "-db", "-f", cfg], port)
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        for i in range(HAPROXY_IDLE):
            sock, _ = http_get(port, b"/idle%d" % i, deadline)
            held.callback(sock.close)
        for i in range(HAPROXY_PENDING):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.callback(sock.close)
            sock.sendall(b"GET /pending%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % i)
        admin = os.path.join(cls.scratch, "admin.sock")
        expected = HAPROXY_IDLE + 2 * HAPROXY_PENDING  # a pending request also holds its backend connection
        while True:
            info = dict(line.split(": ", 1) for line in haproxy_command(admin, b"show info").splitlines() if ": " in line)
            if int(info["CurrConns"]) >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        cls.connections = int(info["CurrConns"])
        pools = haproxy_command(admin, b"show pools")
        stream = next(line for line in pools.splitlines() if line.strip().startswith("- Pool stream "))
        cls.stream_size = int(stream.split("(")[1].split()[0])
        cls.streams_used = int(stream.split(" used ")[0].rsplit(",", 1)[1].split()[0])
        return server.pid

    def test_the_streams_in_use_are_reachable(self):
        self.assertEqual(self.connections, HAPROXY_IDLE + 2 * HAPROXY_PENDING)
        # The pending requests' streams (and the sink frontend's, one each); each pool object is one malloc'd
        # block of the pool's size and a few bytes of pool bookkeeping.
        self.assertGreaterEqual(self.streams_used, 2 * HAPROXY_PENDING)
        streams = [b for b in self.held_from_a_start() if self.stream_size <= b["usable_size"] <= self.stream_size + 32]
        self.assertGreaterEqual(len(streams), self.streams_used)


if __name__ == "__main__":
    unittest.main()
