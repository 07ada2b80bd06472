"""The Python client against a real idcar server started by each test ($IDCAR_BIN).

Run by ../run-tests.sh against the package as pip installed it (see test_the_installed_package).
"""

import asyncio
import importlib.metadata
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from typing import IO, Any

import idcar

LAYOUTS = ["lable64", "ugd60", "si53", "sno80", "muid128", "uuid7"]
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
#: The repository's known answers for uuid7, shared with the server's and the other clients'
#: tests.
UUID7_VECTORS = os.path.join(SOURCE, "..", "..", "tests", "vectors", "uuid7.jsonl")


def find_bin() -> str:
    """$IDCAR_BIN, else the newer of the repository's target/debug and target/release idcar."""
    named = os.environ.get("IDCAR_BIN", "")
    if named:
        return named
    repo = os.path.dirname(os.path.dirname(SOURCE))
    built = [os.path.join(repo, "target", p, "idcar") for p in ("debug", "release")]
    found = [b for b in built if os.access(b, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else ""


BIN = find_bin()


def require_bin() -> None:
    if not BIN or not os.access(BIN, os.X_OK):
        raise AssertionError(
            "no idcar server to test against: build it (cargo build --bin idcar) "
            "or set IDCAR_BIN to the idcar binary"
        )


class Server:
    """``idcar serve`` on a socket in its own temporary directory."""

    log: IO[bytes]

    def __init__(self, *extra: str, directory: str | None = None) -> None:
        require_bin()
        self.dir = directory or tempfile.mkdtemp(prefix="idcar-py-")
        self.socket = os.path.join(self.dir, "s.sock")
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.log = open(os.path.join(self.dir, "log"), "ab")
        proc = self.proc = subprocess.Popen(
            [BIN, "serve", "--socket", self.socket, "--state-file",
             os.path.join(self.dir, "state"), "--admin-addr", "none", "--log", "warn",
             *self.extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.settimeout(1)
                s.connect(self.socket)
                s.sendall(bytes([0xD1, 2, 0, 0]))
                if len(s.recv(8)) == 8:
                    return
            except OSError:
                pass
            finally:
                s.close()
            if proc.poll() is not None:
                raise AssertionError(f"idcar exited: {self.logs()}")
            time.sleep(0.02)
        raise AssertionError(f"idcar did not answer in 10 s: {self.logs()}")

    def logs(self) -> str:
        with open(os.path.join(self.dir, "log"), "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def idcar_decode(layout: str, text: str, *extra: str) -> dict[str, Any]:
    out = subprocess.run([BIN, "decode", "--layout", layout, "--json", *extra, text],
                         capture_output=True, text=True, timeout=10, check=True)
    fields: dict[str, Any] = json.loads(out.stdout)
    return fields


def key(i: idcar.Id) -> idcar.Id:
    return i if isinstance(i, (int, uuid.UUID)) else bytes(i)


class SlowCounter:
    """A fake idcar (lable64's width) that issues 1, 2, 3, ... and answers each get-IDs request
    ``delay`` seconds late: a prefetch refill is always in flight when its buffer runs dry."""

    def __init__(self, delay: float) -> None:
        self.socket = os.path.join(tempfile.mkdtemp(), "slow.sock")
        self.delay = delay
        self.next = 1
        self.lock = threading.Lock()
        self.lsn = socket.socket(socket.AF_UNIX)
        self.lsn.bind(self.socket)
        self.lsn.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.lsn.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                length = int.from_bytes(head[2:4], "big")
                body = conn.recv(length, socket.MSG_WAITALL) if length else b""
                if head[1] == 2:
                    desc = json.dumps({"layout": "lable64", "width": 8, "form": "decimal",
                                       "params": {"cluster": "0"}}).encode()
                    conn.sendall(bytes([0xD1, 0, 0, 0]) + len(desc).to_bytes(4, "big") + desc)
                    continue
                count = int.from_bytes(body[:4], "big")
                time.sleep(self.delay)
                with self.lock:
                    first, self.next = self.next, self.next + count
                payload = b"".join(i.to_bytes(8, "big") for i in range(first, first + count))
                conn.sendall(bytes([0xD1, 0, 8, 0]) + len(payload).to_bytes(4, "big") + payload)

    def close(self) -> None:
        self.lsn.close()


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        require_bin()

    def hammer(self, client: idcar.Client, workers: int = 8, each: int = 300) -> list[idcar.Id]:
        got: list[idcar.Id] = []
        errors: list[Exception] = []
        lock = threading.Lock()

        def work() -> None:
            try:
                mine = [client.next_id() for _ in range(each // 2)] + client.ids(each // 2)
                with lock:
                    got.extend(mine)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(len(got), workers * each)
        self.assertEqual(len({key(i) for i in got}), len(got), "duplicate IDs")
        return got

    def test_unique_across_threads_with_and_without_prefetch(self) -> None:
        srv = Server()
        try:
            for prefetch in (0, 200):
                with idcar.Client(srv.socket, prefetch=prefetch) as c:
                    ids = self.hammer(c)
                    self.assertTrue(all(isinstance(i, int) for i in ids))
        finally:
            srv.close()

    def test_prefetched_ids_are_dropped_past_their_age(self) -> None:
        srv = Server()
        try:
            with idcar.Client(srv.socket, prefetch=50, max_age=0.2) as c:
                first = c.next_id()
                time.sleep(0.5)  # the refill's IDs are now too old
                later = c.next_id()
                self.assertGreater(idcar.decode("lable64", later)["timestamp_ms"],
                                   idcar.decode("lable64", first)["timestamp_ms"] + 300)
        finally:
            srv.close()

    def test_server_restart_mid_stream(self) -> None:
        srv = Server()
        try:
            with idcar.Client(srv.socket, prefetch=0) as c:
                before = c.ids(500)
                srv.stop()
                srv.start()
                after = c.ids(500)
                self.assertEqual(len({*before, *after}), 1000)
        finally:
            srv.close()

    def test_unavailable_retries_then_raises_with_the_reason(self) -> None:
        srv = Server("--zk", "127.0.0.1:1", "--zk-session-timeout", "2s")
        try:
            with idcar.Client(srv.socket, retry_deadline=1.0) as c:
                t = time.monotonic()
                with self.assertRaises(idcar.UnavailableError) as e:
                    c.next_id()
                took = time.monotonic() - t
                self.assertIn("no lease", str(e.exception))
                self.assertGreaterEqual(took, 0.95)
                self.assertLess(took, 10)
        finally:
            srv.close()

    def test_missing_socket_is_a_clear_error(self) -> None:
        path = os.path.join(tempfile.mkdtemp(), "missing.sock")
        t = time.monotonic()
        with self.assertRaises(idcar.ConnectError) as e:
            idcar.Client(path, retry_deadline=0.3).next_id()
        self.assertIn(path, str(e.exception))
        self.assertLess(time.monotonic() - t, 5)

    def test_a_socket_in_a_missing_directory_fails_at_once(self) -> None:
        path = os.path.join(tempfile.mkdtemp(), "nodir", "idcar.sock")
        for client in (idcar.Client(path), idcar.Client(path, prefetch=10)):
            t = time.monotonic()
            with self.assertRaises(idcar.ConnectError) as e:
                client.next_id()
            self.assertLess(time.monotonic() - t, 1, "retried a directory that cannot appear")
            self.assertIn(f"directory {os.path.dirname(path)} does not exist", str(e.exception))

    def test_prefetched_ids_come_in_issue_order(self) -> None:
        srv = SlowCounter(0.05)
        try:
            with idcar.Client(srv.socket, prefetch=20) as c:
                got = [c.next_id() for _ in range(100)]
                self.assertEqual(got, sorted(got), "handed out out of issue order")
                self.assertEqual(got, list(range(1, 101)))
            with idcar.Client(srv.socket, prefetch=20) as c:
                seen: list[list[idcar.Id]] = [[] for _ in range(4)]

                def work(mine: list[idcar.Id]) -> None:
                    for _ in range(50):
                        mine.append(c.next_id())

                threads = [threading.Thread(target=work, args=(m,)) for m in seen]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(60)
                for mine in seen:
                    self.assertEqual(len(mine), 50)
                    self.assertEqual(mine, sorted(mine), "a thread saw IDs out of issue order")
                self.assertEqual(len({i for m in seen for i in m}), 200)
        finally:
            srv.close()

    def test_decode_matches_idcar_decode_for_every_layout(self) -> None:
        for layout in LAYOUTS:
            extra = ["--mid-bits", "3"] if layout == "si53" else []
            srv = Server("--layout", layout, *extra)
            try:
                with idcar.Client(srv.socket) as c:
                    self.assertEqual(c.describe().layout, layout)
                    for i in c.ids(3):
                        text = c.text(i)
                        self.assertEqual(c.decode(i), idcar_decode(layout, text, *extra),
                                         f"{layout} {text}")
                        self.assertEqual(idcar.parse(layout, text), i, f"{layout} {text}")
            finally:
                srv.close()

    def test_garbage_answers_are_a_protocol_error_not_a_hang(self) -> None:
        d = tempfile.mkdtemp()
        path = os.path.join(d, "fake.sock")
        lsn = socket.socket(socket.AF_UNIX)
        lsn.bind(path)
        lsn.listen(4)

        def serve() -> None:
            for _ in range(4):
                try:
                    conn, _ = lsn.accept()
                except OSError:
                    return
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        try:
            t = time.monotonic()
            with self.assertRaises(idcar.ProtocolError):
                idcar.Client(path, timeout=2, retry_deadline=0.5).next_id()
            self.assertLess(time.monotonic() - t, 5)
        finally:
            lsn.close()

    def test_known_answers_without_a_server(self) -> None:
        f = idcar.decode("lable64", 0x7E3C018045810093)
        self.assertEqual((f["timestamp_ms"], f["sequence"], f["generator"], f["cluster"]),
                         (1795321511038, 1, 9, 3))
        self.assertEqual(f["time"], "2026-11-22T04:25:11.038Z")
        raw = bytes.fromhex("5D5EAC793E61F1BFC71B112D0000000B")
        m = idcar.decode("muid128", raw)
        self.assertEqual((m["timestamp"], m["medallion"], m["offset"]),
                         (1642579230975519, 1923190821165, 11))
        self.assertEqual(idcar.text("muid128", raw), "5D5EAC793E61F-1BFC71B112D-0000000B")
        with self.assertRaises(idcar.LayoutError):
            idcar.decode("lable64", 0x7E3C018045810093 | 1 << 12)

    def test_uuid7_known_answers(self) -> None:
        with open(UUID7_VECTORS, encoding="utf-8") as f:
            vectors = [json.loads(line) for line in f if line.strip()]
        answered = refused = 0
        for v in vectors:
            if "error" in v:
                # Text the server refuses (not a UUIDv7, wrong length, a bad character): in
                # any form or with the form told by its shape.
                with self.assertRaises(idcar.LayoutError, msg=v["note"]):
                    idcar.parse("uuid7", v["text"])
                refused += 1
                continue
            u = idcar.parse("uuid7", v["uuid"])
            self.assertIsInstance(u, uuid.UUID)
            self.assertEqual((u.version, u.hex), (7, v["hex"]))
            raw = bytes.fromhex(v["hex"])
            forms: list[idcar.Id] = [u, raw, int(v["hex"], 16)]
            for i in forms:
                self.assertEqual(idcar.text("uuid7", i), v["uuid"])
                self.assertEqual(idcar.text("uuid7", i, form="uuid"), v["uuid"])
                self.assertEqual(idcar.text("uuid7", i, form="hex"), v["hex"])
            for text, form in ((v["uuid"], "uuid"), (v["hex"], "hex"), (v.get("ulid"), "ulid")):
                if text is None:
                    continue
                for t in (text, text.upper(), text.lower()):
                    self.assertEqual(idcar.parse("uuid7", t), u, t)
                    self.assertEqual(idcar.parse("uuid7", t, form=form), u, t)
            if "ulid" in v:
                self.assertEqual(idcar.text("uuid7", u, form="ulid"), v["ulid"])
            if v["time"] is None:
                with self.assertRaises(idcar.LayoutError, msg=v["note"]):
                    idcar.decode("uuid7", u)  # after 9999: no RFC 3339 time
                continue
            fields = idcar.decode("uuid7", u)
            self.assertEqual(fields, idcar.decode("uuid7", raw))
            want: dict[str, Any] = {
                "layout": "uuid7", "id": v["uuid"], "hex": v["hex"],
                "unix_ts_ms": v["unix_ts_ms"], "time": v["time"], "issuer": v["issuer"],
            }
            if v["issuer"] == "idcar":
                want.update({k: v[k] for k in ("counter", "cluster", "slot", "random")})
            self.assertEqual(dict(fields), want, v["uuid"])
            answered += 1
        self.assertGreaterEqual((answered, refused), (10, 7))
        # The SPEC's own examples.
        ours = idcar.decode("uuid7", uuid.UUID("01a20180-3c7e-74b5-a873-0009a1b2c3ac"))
        self.assertEqual((ours["unix_ts_ms"], ours.get("counter"), ours.get("cluster"),
                          ours.get("slot"), ours.get("random"), ours["issuer"]),
                         (1795321511038, 1234567, 3, 9, 10597059, "idcar"))
        rfc = idcar.decode("uuid7", uuid.UUID("017f22e2-79b0-7cc3-98c4-dc0c0c07398f"))
        self.assertEqual((rfc["unix_ts_ms"], rfc["time"], rfc["issuer"]),
                         (1645557742000, "2022-02-22T19:22:22.000Z", "other"))
        # Other text forms are not uuid7's; other UUIDs (version 4) are not uuid7 IDs.
        with self.assertRaises(idcar.LayoutError):
            idcar.text("uuid7", uuid.UUID(rfc["id"]), form="muid")
        with self.assertRaises(idcar.LayoutError):
            idcar.decode("uuid7", uuid.UUID("919108f7-52d1-4320-9bac-f847db4148a8"))
        with self.assertRaises(idcar.LayoutError):
            idcar.decode("lable64", uuid.UUID(rfc["id"]))  # a UUID is 16 bytes

    def test_uuid7_ids_are_uuids(self) -> None:
        srv = Server("--layout", "uuid7")
        try:
            for prefetch in (0, 100):
                with idcar.Client(srv.socket, prefetch=prefetch) as c:
                    d = c.describe()
                    self.assertEqual((d.layout, d.width, d.form), ("uuid7", 16, "uuid"))
                    self.assertEqual(d.params, {"cluster-id": "0"})
                    first = c.next_id()
                    if not isinstance(first, uuid.UUID):
                        self.fail(f"uuid7 IDs are uuid.UUID, got {first!r}")
                    self.assertEqual((first.version, first.variant), (7, uuid.RFC_4122))
                    self.assertEqual(c.text(first), str(first))
                    f = c.decode(first)
                    if f["layout"] != "uuid7":  # narrows idcar.Fields to idcar.Uuid7Fields
                        self.fail(f"decoded as {f['layout']}")
                    self.assertEqual((f["issuer"], f.get("cluster")), ("idcar", 0))
                    rest = [i for i in c.ids(300) if isinstance(i, uuid.UUID) and i.version == 7]
                    self.assertEqual(len(rest), 300)
                    # One slot's IDs increase, as numbers and as text.
                    self.assertEqual(rest, sorted(rest))
                    self.assertEqual([str(i) for i in rest], sorted(str(i) for i in rest))
                    self.assertGreater(rest[0], first)

            async def run() -> None:
                async with idcar.AsyncClient(srv.socket) as c:
                    got = await c.ids(3)
                    self.assertTrue(all(isinstance(i, uuid.UUID) and i.version == 7
                                        for i in got))
                    self.assertEqual(await c.text(got[0]), str(got[0]))
                    f = await c.decode(got[0])
                    if f["layout"] != "uuid7":
                        self.fail(f"decoded as {f['layout']}")
                    self.assertEqual(f["issuer"], "idcar")

            asyncio.run(asyncio.wait_for(run(), 30))
        finally:
            srv.close()


class AsyncClientTest(unittest.TestCase):
    def setUp(self) -> None:
        require_bin()

    def test_unique_across_tasks_with_and_without_prefetch(self) -> None:
        srv = Server("--layout", "sno80")
        try:
            async def run(prefetch: int) -> None:
                async with idcar.AsyncClient(srv.socket, prefetch=prefetch) as c:
                    async def work() -> list[idcar.Id]:
                        return [await c.next_id() for _ in range(150)] + await c.ids(150)
                    parts = await asyncio.wait_for(asyncio.gather(*(work() for _ in range(8))), 60)
                    ids = [i for p in parts for i in p]
                    self.assertEqual(len(ids), 2400)
                    self.assertEqual(len(set(ids)), 2400)
                    first = ids[0]
                    if not isinstance(first, bytes):
                        self.fail(f"sno80 IDs are bytes, got {first!r}")
                    self.assertEqual(len(first), 10)
                    text = await c.text(first)
                    self.assertEqual(await c.decode(first), idcar_decode("sno80", text))

            for prefetch in (0, 300):
                asyncio.run(run(prefetch))
        finally:
            srv.close()

    def test_async_prefetched_ids_come_in_issue_order(self) -> None:
        srv = SlowCounter(0.05)
        try:
            async def run() -> None:
                async with idcar.AsyncClient(srv.socket, prefetch=20) as c:
                    got = [await c.next_id() for _ in range(100)]
                    self.assertEqual(got, sorted(got), "handed out out of issue order")

                    async def work() -> list[idcar.Id]:
                        return [await c.next_id() for _ in range(50)]
                    parts = await asyncio.wait_for(asyncio.gather(*(work() for _ in range(4))), 60)
                    for mine in parts:
                        self.assertEqual(mine, sorted(mine), "a task saw IDs out of issue order")
                    self.assertEqual(len({i for m in parts for i in m}), 200)
                    last = got[-1]
                    later = [i for m in parts for i in m if isinstance(i, int)]
                    assert isinstance(last, int)
                    self.assertEqual(len(later), 200)
                    self.assertTrue(all(i > last for i in later))

            asyncio.run(run())
            path = os.path.join(tempfile.mkdtemp(), "nodir", "idcar.sock")

            async def missing() -> None:
                async with idcar.AsyncClient(path) as c:
                    await c.next_id()

            t = time.monotonic()
            with self.assertRaises(idcar.ConnectError) as e:
                asyncio.run(missing())
            self.assertLess(time.monotonic() - t, 1, "retried a directory that cannot appear")
            self.assertIn("does not exist", str(e.exception))
        finally:
            srv.close()

    def test_async_unavailable_and_restart(self) -> None:
        srv = Server("--zk", "127.0.0.1:1", "--zk-session-timeout", "2s")
        ok = Server()
        try:
            async def run() -> None:
                async with idcar.AsyncClient(srv.socket, retry_deadline=1.0) as c:
                    t = time.monotonic()
                    with self.assertRaises(idcar.UnavailableError):
                        await c.next_id()
                    self.assertGreaterEqual(time.monotonic() - t, 0.95)
                async with idcar.AsyncClient(ok.socket) as c:
                    before = await c.ids(200)
                    ok.stop()
                    ok.start()
                    after = await c.ids(200)
                    self.assertEqual(len({*before, *after}), 400)

            asyncio.run(asyncio.wait_for(run(), 60))
        finally:
            srv.close()
            ok.close()


def readme_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of README.md, in order: (tag, text)."""
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return re.findall(r"^```(\w*)\n(.*?)^```$", readme, re.S | re.M)


def run_python(args: list[str], socket_path: str) -> subprocess.CompletedProcess[str]:
    """This interpreter (the test venv's) on ``args``, in an empty directory (so ``import
    idcar`` finds only the installed package), IDCAR_SOCKET set: bounded to 30 s."""
    with tempfile.TemporaryDirectory(prefix="idcar-py-run-") as cwd:
        return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                              timeout=30, env={**os.environ, "IDCAR_SOCKET": socket_path})


class PackageTest(unittest.TestCase):
    """What is under test is the installed package, and the README and examples work with it."""

    def test_the_package_is_installed_with_its_type_marker(self) -> None:
        # Installed by pip (run-tests.sh also checks that the copy imported here is the venv's,
        # not the source tree's), and PEP 561's marker ships with it, so type checkers use its
        # hints.
        files = [str(f) for f in importlib.metadata.files("idcar-client") or []]
        self.assertIn("idcar/py.typed", files)
        self.assertIn("idcar/_client.py", files)
        installed = os.path.realpath(idcar.__file__)
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(installed), "py.typed")))
        self.assertEqual(importlib.metadata.version("idcar-client"), idcar.__version__)

    def test_readme_starts_with_the_install_line_then_the_example(self) -> None:
        blocks = readme_blocks()
        self.assertGreaterEqual(len(blocks), 2)
        self.assertEqual(blocks[0][0], "sh")
        self.assertIn('pip install "git+https://github.com/idcar/idcar#subdirectory=clients/python"',
                      blocks[0][1])
        self.assertEqual(blocks[1][0], "python")

    def test_readme_example_prints_an_id_the_server_issued(self) -> None:
        code = next(text for tag, text in readme_blocks() if tag == "python")
        srv = Server()
        try:
            before_ms = int(time.time() * 1000)
            with tempfile.TemporaryDirectory(prefix="idcar-py-readme-") as d:
                script = os.path.join(d, "example.py")
                with open(script, "w", encoding="utf-8") as f:
                    f.write(code)
                out = run_python([script], srv.socket)
            after_ms = int(time.time() * 1000)
            self.assertEqual(out.returncode, 0, out.stderr)
            first = out.stdout.splitlines()[0]
            self.assertRegex(first, r"^[0-9a-f]{16}$")
            fields = idcar_decode("lable64", first)  # exit status 0, or CalledProcessError
            self.assertEqual(fields["id"], first)
            self.assertGreaterEqual(fields["timestamp_ms"], before_ms - 1000)
            self.assertLessEqual(fields["timestamp_ms"], after_ms + 1000)
        finally:
            srv.close()

    def test_fetch_example_runs_on_the_installed_package(self) -> None:
        srv = Server("--layout", "muid128")
        try:
            fetch = os.path.join(SOURCE, "examples", "fetch.py")
            out = run_python([fetch, "--count", "3", "--prefetch", "10"], srv.socket)
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(len(lines), 3)
            self.assertEqual(len(set(lines)), 3)
            for line in lines:
                self.assertEqual(idcar_decode("muid128", line)["id"], line)
            for args in (["--count", "0"], ["--retry-deadline", "soon"],
                         ["--retry-deadline", "-1"], ["--retry-deadline", "nan"]):
                bad = run_python([fetch, *args], srv.socket)
                self.assertEqual((bad.returncode, bad.stdout), (1, ""), args)
                self.assertTrue(bad.stderr.startswith("error: "), bad.stderr)
                self.assertEqual(len(bad.stderr.splitlines()), 1, bad.stderr)
        finally:
            srv.close()

    def test_fetch_example_prints_uuid7_ids_and_honours_the_retry_deadline(self) -> None:
        srv = Server("--layout", "uuid7")
        try:
            fetch = os.path.join(SOURCE, "examples", "fetch.py")
            out = run_python([fetch, "--count", "2", "--retry-deadline", "0.5"], srv.socket)
            self.assertEqual(out.returncode, 0, out.stderr)
            for line in out.stdout.splitlines():
                self.assertEqual(str(uuid.UUID(line)), line)
                self.assertEqual(idcar_decode("uuid7", line)["issuer"], "idcar")
            # A missing socket is retried until the deadline: not at all with 0, for a second
            # with 1 (each run also starts Python: compare the two).
            missing = os.path.join(srv.dir, "missing.sock")
            took: dict[str, float] = {}
            for deadline in ("0", "1.0"):
                t = time.monotonic()
                got = run_python([fetch, "--socket", missing, "--retry-deadline", deadline],
                                 srv.socket)
                took[deadline] = time.monotonic() - t
                self.assertEqual((got.returncode, got.stdout), (1, ""))
                self.assertIn(f"error: cannot connect to {missing}", got.stderr)
            self.assertLess(took["0"], 5)
            self.assertGreater(took["1.0"] - took["0"], 0.7, took)
            self.assertLess(took["1.0"], 10)
        finally:
            srv.close()


if __name__ == "__main__":
    unittest.main()
