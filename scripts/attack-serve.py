#!/usr/bin/env python3
"""Attack harness for `packager serve` (plain HTTP on 127.0.0.1). Python 3 standard library only, Linux only
(it reads /proc).

Subcommands, each printing one JSON line on stdout (progress goes to stderr with -v):

  flood     One connection that pipelines a request over and over and never reads (security review N1). Samples the
            server's VmRSS every 0.5 s, stops at --seconds or once growth passes --limit-mb, closes, waits 3 s.
            Always exits 0; the caller judges the numbers.
  slowread  N connections that each send one request and never read (review N8). Counts, once a second, how many the
            server has closed. Always exits 0.
  h2streams N connections over TLS that choose HTTP/2 by ALPN and each open S streams for one path (literal HPACK
            fields), with the largest windows, and never read. Samples the server's VmRSS for --seconds; reports the
            peak. Always exits 0.
  fuzz      Random, often malformed requests (review N11, N13 and "what was tried and held"), then a plain `GET /` to
            check that the server still answers. Exits 1 when it does not.

Examples:
  attack-serve.py flood --port 18621 --pid $PID --request 'GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' \\
      --seconds 10 --limit-mb 600
  attack-serve.py slowread --port 18621 --pid $PID --connections 20 --seconds 30 \\
      --request 'GET /big.txt HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nIf-None-Match: "x"\\r\\n\\r\\n'
  attack-serve.py fuzz --port 18621 --seconds 20 --seed 1

--request takes escape sequences: \\r \\n \\t \\0 \\\\ \\xHH (a byte). Other characters are sent as UTF-8.
"""
import argparse
import collections
import email.utils
import errno
import json
import os
import random
import re
import resource
import select
import socket
import struct
import sys
import threading
import time

HOST = "127.0.0.1"
VERBOSE = False


def log(message):
    if VERBOSE:
        print(message, file=sys.stderr, flush=True)


# MARK: - Helpers


def decode_escapes(text):
    """`GET / HTTP/1.1\\r\\n...` as typed on a command line → the bytes to send."""
    raw = text.encode("utf-8")
    out = bytearray()
    simple = {ord("r"): b"\r", ord("n"): b"\n", ord("t"): b"\t", ord("0"): b"\0", ord("\\"): b"\\",
              ord('"'): b'"', ord("'"): b"'"}
    i = 0
    while i < len(raw):
        byte = raw[i]
        if byte == 0x5C and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if nxt == ord("x") and re.fullmatch(rb"[0-9A-Fa-f]{2}", raw[i + 2:i + 4]):
                out.append(int(raw[i + 2:i + 4], 16))
                i += 4
                continue
        out.append(byte)
        i += 1
    return bytes(out)


def rss_mb(pid):
    """The process's resident set in MiB, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def r1(value):
    return None if value is None else round(value, 1)


def new_socket(rcvbuf=None, timeout=5.0):
    """A TCP socket; the receive buffer is set before connect so the advertised window (and its scale) stays small."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    return s


def connect(port, rcvbuf=None, timeout=5.0):
    s = new_socket(rcvbuf, timeout)
    try:
        s.connect((HOST, port))
    except BaseException:
        s.close()
        raise
    return s


def close_quietly(s, reset=False):
    try:
        if reset:  # RST instead of FIN
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (hard, 1 << 20, 65536):
        if want == resource.RLIM_INFINITY or want <= soft:
            continue
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            return want
        except (ValueError, OSError):
            continue
    return soft


def emit(result):
    print(json.dumps(result), flush=True)


# MARK: - flood


def cmd_flood(args):
    request = decode_escapes(args.request)
    result = {"sent_bytes": 0, "requests_sent": 0, "base_rss_mb": None, "peak_rss_mb": None, "growth_mb": None,
              "after_close_rss_mb": None}
    base = rss_mb(args.pid)
    peak = base
    result["base_rss_mb"] = r1(base)
    sent = 0
    stop_reason = "time"
    start = time.monotonic()
    s = None
    try:
        if not request:
            raise ValueError("empty --request")
        s = connect(args.port, rcvbuf=4096)
        s.setblocking(False)
        # A block of whole requests; sending from an offset inside it keeps the request boundaries in phase.
        block = memoryview(request * max(1, 65536 // len(request)))
        position = 0
        next_sample = start + 0.5
        while True:
            now = time.monotonic()
            if now - start >= args.seconds:
                break
            if now >= next_sample:
                next_sample += 0.5
                current = rss_mb(args.pid)
                if current is None:
                    stop_reason = "server gone"
                    break
                peak = max(peak or 0.0, current)
                log(f"t={now - start:5.1f}s sent={sent / 1e6:8.2f} MB rss={current:8.1f} MiB "
                    f"(+{current - (base or 0):.1f})")
                if base is not None and current - base > args.limit_mb:
                    stop_reason = "limit"
                    break
            wait = max(0.0, min(next_sample, start + args.seconds) - time.monotonic())
            try:
                _, writable, _ = select.select([], [s], [], wait)
            except (OSError, ValueError):
                stop_reason = "socket error"
                break
            if not writable:
                continue
            try:
                n = s.send(block[position:])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as error:  # reset, broken pipe: the server closed the connection
                stop_reason = f"server closed ({errno.errorcode.get(error.errno, error.errno)})"
                break
            sent += n
            position += n
            if position >= len(block):
                position = 0
    except Exception as error:  # noqa: BLE001 - the caller gets the numbers and the reason
        stop_reason = f"error: {error!r}"
    finally:
        if s is not None:
            close_quietly(s)
    elapsed = time.monotonic() - start
    current = rss_mb(args.pid)
    if current is not None:
        peak = max(peak or 0.0, current)
    time.sleep(3)
    after = rss_mb(args.pid)
    result.update({
        "sent_bytes": sent,
        "requests_sent": sent // len(request) if request else 0,
        "peak_rss_mb": r1(peak),
        "growth_mb": r1(peak - base) if peak is not None and base is not None else None,
        "after_close_rss_mb": r1(after),
        "seconds": round(elapsed, 1),
        "stop_reason": stop_reason,
    })
    emit(result)
    return 0


# MARK: - slowread

TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
              7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}


def server_side_states(port):
    """{client port: TCP state} of the server's sockets on 127.0.0.1:port, from /proc/net/tcp; None if unreadable."""
    states = {}
    try:
        with open("/proc/net/tcp") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) < 4:
                    continue
                local, remote, state = fields[1], fields[2], int(fields[3], 16)
                if local != f"0100007F:{port:04X}":
                    continue
                rhost, rport = remote.split(":")
                if rhost == "0100007F":
                    states[int(rport, 16)] = state
    except (OSError, ValueError):
        return None
    return states


def peer_closed(s):
    """Whether the peer closed or reset this socket, as seen from here. Unread data may sit before a FIN, so data
    available is not a verdict; the kernel's TCP state (CLOSE_WAIT once the FIN arrived) is asked as well."""
    try:
        data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        if data == b"":
            return True
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:  # ECONNRESET and the like
        return True
    try:
        state = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
        if state != 1:
            return True
    except (OSError, AttributeError):
        pass
    return False


def cmd_slowread(args):
    try:
        return slowread(args)
    except Exception as error:  # noqa: BLE001 - the caller still gets a JSON line
        emit({"connections": 0, "closed": 0, "seconds_until_all_closed": None, "peak_rss_mb": None,
              "base_rss_mb": r1(rss_mb(args.pid)), "error": repr(error)})
        return 0


def slowread(args):
    raise_nofile()
    request = decode_escapes(args.request)
    base = rss_mb(args.pid)
    peak = base
    opened = {}  # socket → local port
    failed = 0
    for _ in range(args.connections):
        s = None
        try:
            s = connect(args.port, rcvbuf=4096)
            s.sendall(request)
            s.setblocking(False)
            opened[s] = s.getsockname()[1]
        except Exception as error:  # noqa: BLE001
            failed += 1
            log(f"connection failed: {error!r}")
            if s is not None:
                close_quietly(s)
    total = len(opened)
    start = time.monotonic()
    # The server's side of each connection, when /proc shows it: a server close leaves its socket in FIN_WAIT1
    # behind data this client never reads, and that FIN never reaches this side.
    table = server_side_states(args.port)
    use_table = bool(table) and any(port in table for port in opened.values())
    closed = 0
    all_closed_after = None
    while True:
        elapsed = time.monotonic() - start
        table = server_side_states(args.port) if use_table else None
        for s, port in list(opened.items()):
            gone = peer_closed(s)
            if not gone and table is not None and table.get(port) != 1:
                gone = True
            if gone:
                closed += 1
                del opened[s]
                close_quietly(s)
        current = rss_mb(args.pid)
        if current is not None:
            peak = max(peak or 0.0, current)
        log(f"t={elapsed:5.1f}s closed={closed}/{total} rss={current}")
        if total and not opened:
            all_closed_after = round(elapsed, 1)
            break
        if elapsed >= args.seconds or not total:
            break
        time.sleep(max(0.0, min(args.interval, args.seconds - elapsed)))
    for s in opened:
        close_quietly(s)
    emit({"connections": total, "closed": closed, "seconds_until_all_closed": all_closed_after,
          "peak_rss_mb": r1(peak), "base_rss_mb": r1(base), "failed_connections": failed})
    return 0


# MARK: - fuzz

STATUS_LINE = re.compile(rb"HTTP/\d\.\d (\d{3})")


class Responses:
    """Splits what a connection received into responses, so a reader knows when every request was answered."""

    def __init__(self):
        self.buffer = bytearray()
        self.methods = collections.deque()
        self.statuses = []
        self.state = "head"  # head, body, chunk-size, chunk-data, trailer, until-close, desync
        self.remaining = 0

    def expect(self, method):
        self.methods.append(method)

    @property
    def settled(self):
        """Every request answered, or nothing more can be learned from the bytes."""
        return (self.state == "head" and not self.methods and not self.buffer) or self.state == "desync"

    def feed(self, data):
        self.buffer += data
        buf = self.buffer
        while buf:
            if self.state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > 256 * 1024 or (len(buf) >= 12 and not STATUS_LINE.match(buf)):
                        self.state = "desync"
                    return
                head = bytes(buf[:end])
                del buf[:end + 4]
                match = STATUS_LINE.match(head)
                if not match:
                    self.state = "desync"
                    return
                code = int(match.group(1))
                self.statuses.append(code)
                if 100 <= code < 200 and code != 101:
                    continue  # interim: the final answer follows
                method = self.methods.popleft() if self.methods else b"GET"
                fields = {}
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    fields.setdefault(name.strip().lower(), []).append(value.strip())
                if method == b"HEAD" or code in (204, 304) or code == 101:
                    continue
                if b"chunked" in b",".join(fields.get(b"transfer-encoding", [])).lower():
                    self.state = "chunk-size"
                elif b"content-length" in fields:
                    try:
                        self.remaining = int(fields[b"content-length"][0])
                    except ValueError:
                        self.state = "desync"
                        return
                    self.state = "body" if self.remaining > 0 else "head"
                else:
                    self.state = "until-close"
            elif self.state in ("body", "chunk-data"):
                take = min(self.remaining, len(buf))
                del buf[:take]
                self.remaining -= take
                if self.remaining:
                    return
                self.state = "head" if self.state == "body" else "chunk-size"
            elif self.state in ("chunk-size", "trailer"):
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 4096:
                        self.state = "desync"
                    return
                line = bytes(buf[:end])
                del buf[:end + 2]
                if self.state == "trailer":
                    if not line:
                        self.state = "head"
                    continue
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    self.state = "desync"
                    return
                if size == 0:
                    self.state = "trailer"
                else:
                    self.remaining = size + 2  # data and its CRLF
                    self.state = "chunk-data"
            else:  # until-close, desync
                buf.clear()
                return


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.connections = 0
        self.statuses = collections.Counter()
        self.errors = collections.Counter()
        self.unanswered = 0

    def add(self, requests=0, connections=0, statuses=(), error=None, unanswered=0):
        with self.lock:
            self.requests += requests
            self.connections += connections
            self.statuses.update(str(code) for code in statuses)
            self.unanswered += unanswered
            if error:
                self.errors[error] += 1


class Generator:
    """Random requests. Most are close enough to valid to reach the responder; some are broken on purpose."""

    METHODS = [b"GET"] * 12 + [b"HEAD"] * 3 + [b"POST", b"PUT", b"OPTIONS", b"CONNECT", b"DELETE", b"TRACE", b"PATCH",
                                               b"get", b"Get", b"head", b"PRI", b"G\x00T", b"GET ", b"\xc3\x89T",
                                               b"M-SEARCH", b"PROPFIND"]

    def __init__(self, rng, port, paths):
        self.rng = rng
        self.port = port
        self.paths = paths

    def chance(self, p):
        return self.rng.random() < p

    def noise(self, low, high, alphabet=None):
        n = self.rng.randint(low, high)
        if alphabet is None:
            return bytes(self.rng.getrandbits(8) for _ in range(n))
        return bytes(self.rng.choice(alphabet) for _ in range(n))

    def method(self):
        if self.chance(0.03):
            return self.noise(1, 12, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_!#$%&*+.^`|~0123456789")
        if self.chance(0.005):
            return b"GET" * self.rng.randint(100, 3000)
        return self.rng.choice(self.METHODS)

    def target(self, hostile=True):
        rng = self.rng
        path = rng.choice(self.paths)
        roll = rng.random()
        if not hostile:  # odd, but parseable
            if roll < 0.7:
                return path
            return rng.choice([
                path + b"?" + self.noise(0, 40, b"abc=&%20+0123456789xyz"), b"/%00", path + b"%00", b"/%2e%2e/%2e%2e/",
                b"/caf%C3%A9", b"/%ff", b"//", b"/..", b"http://127.0.0.1:%d%s" % (self.port, path), b"*",
                b"http://evil@127.0.0.1:%d%s" % (self.port, path), b"/" + b"a" * rng.randint(1000, 4000),
            ])
        if roll < 0.45:
            return path
        if roll < 0.55:
            return path + b"?" + self.noise(0, 40, b"abc=&%20+0123456789xyz")
        options = [
            b"*", b"", b"/", b"//", b"/..", b"/../../etc/passwd", b"/%2e%2e/%2e%2e/etc/passwd", b"/%252e%252e/",
            b"/..%2F..%2Fetc", b"/..\\..\\x", b"/%00", b"/a%00b", path + b"%00", b"/\x00", b"/a\x7fb", b"/a b",
            b"/\x1b[31m", b"/caf\xc3\xa9", b"/\xff\xfe\xfd", b"/%ff%fe", b"/%", b"/%zz", b"/#frag", b"/?",
            b"@127.0.0.1/", b"@evil.example/", b"127.0.0.1:%d" % self.port,
            b"http://127.0.0.1:%d%s" % (self.port, path), b"http://127.0.0.1%s" % path, b"HTTP://127.0.0.1/",
            b"http://evil.example/", b"https://evil.example" + path, b"http://evil@127.0.0.1:%d/" % self.port,
            b"http://127.0.0.1:%d@evil.example/" % self.port, b"http://127.0.0.1", b"http://", b"http:///x",
            b"ftp://127.0.0.1/", b"//evil.example/x", b"\\\\evil\\x",
        ]
        if self.chance(0.03):  # very long: 8 KiB to 100 KiB
            return b"/" + b"a" * rng.randint(8 * 1024, 100 * 1024)
        if self.chance(0.05):
            return path + self.noise(1, 64)
        return rng.choice(options)

    def version(self):
        roll = self.rng.random()
        if roll < 0.85:
            return b"HTTP/1.1"
        return self.rng.choice([b"HTTP/1.0", b"", b"HTTP/0.9", b"HTTP/2.0", b"HTTP/2", b"http/1.1", b"HTTP/1.1 ",
                                b"HTTP/9.9", b"HTTP/1.10", b"HTTP/01.1", b"HTTP/1.1\x00", b"HTTPS/1.1"])

    def host_fields(self, hostile=True):
        rng = self.rng
        good = [b"127.0.0.1:%d" % self.port, b"127.0.0.1", b"localhost:%d" % self.port, b"LOCALHOST"]
        if not hostile:
            return [rng.choice(good)]
        bad = [b"evil.example", b"evil.example:%d" % self.port, b"", b"localhost.", b"127.0.0.1:99999",
               b"127.0.0.1:-1", b"1.2.3.4.5.6", b"evil@127.0.0.1", b"127.0.0.1@evil", b"[::1]", b"[::1",
               b"\xd9\xa1\xd9\xa2\xd9\xa7.0.0.1", b"127.0.0.1 ", b"127.0.0.1, evil.example", b"0x7f000001", b"127.1"]
        roll = rng.random()
        if roll < 0.75:
            return [rng.choice(good)]
        if roll < 0.80:
            return []
        if roll < 0.90:  # two Host fields, in either order (review N13)
            pair = [rng.choice(good), rng.choice(bad + good)]
            rng.shuffle(pair)
            return pair
        return [rng.choice(bad)]

    def range_value(self):
        big = b"18446744073709551615"
        return self.rng.choice([
            b"bytes=0-0", b"bytes=0-", b"bytes=0-99", b"bytes=100-", b"bytes=-1", b"bytes=-100", b"bytes=-0",
            b"bytes=5-1", b"bytes=0-" + big, big + b"-", b"bytes=" + big + b"-", b"bytes=99999999999999999999999999-",
            b"bytes=-" + b"9" * 26, b"bytes=0-1,2-3,4-5", b"bytes=" + b",".join(b"%d-%d" % (i, i) for i in range(3000)),
            b"bytes=a-b", b"bytes=", b"bytes", b"items=0-1", b"bytes = 0-1", b"BYTES=0-1", b"bytes=1-2-3",
            b"bytes=\xd9\xa0-\xd9\xa5", b"bytes=0x10-0x20", b"bytes=-", b"bytes=1--2", b"bytes=+1-2",
            b"bytes=%d-%d" % (self.rng.randint(0, 3_000_000), self.rng.randint(0, 3_000_000)),
        ])

    def etag_value(self):
        return self.rng.choice([
            b"*", b'"x"', b'W/"x"', b'"x", W/"y"', b"x", b'"', b'""', b'W/', b'"' * 70_000, b"\xff\xfe",
            b'"%s"' % self.noise(1, 64, b"0123456789abcdef"), b"*, *", b'"a" , , "b"',
        ])

    def date_value(self):
        rng = self.rng
        when = time.time() + rng.choice([-1e9, -86400, 0, 86400, 1e9])
        return rng.choice([
            email.utils.formatdate(when, usegmt=True).encode(), b"Sunday, 06-Nov-94 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 1994", b"Fri, 31 Dec 9999 23:59:59 GMT", b"Mon, 32 Foo 2024 25:61:61 GMT",
            b"Thu, 01 Jan 1970 00:00:00 GMT", b"0", b"-1", b"9" * 40, b"", b"yesterday", b"\xd9\xa1\xd9\xa2",
            b"Tue, 29 Feb 2023 00:00:00 GMT", b"Sat, 01 Jan 0000 00:00:00 GMT",
        ])

    def encoding_value(self):
        rng = self.rng
        codings = [b"gzip", b"deflate", b"br", b"zstd", b"identity", b"*", b"x-gzip", b"GZIP", b"compress"]
        qs = [b"", b";q=0", b";q=1", b";q=0.5", b";q=nan", b";q=NaN", b";q=inf", b";q=1e400", b";q=-1",
              b";q=1.0001", b";q=0.0000001", b";q=", b";q", b"; q=0.3", b";Q=0", b";q=0x1", b";q=1;q=0"]
        if rng.random() < 0.02:
            return b", ".join(rng.choice(codings) + rng.choice(qs) for _ in range(rng.randint(100, 2000)))
        return b", ".join(rng.choice(codings) + rng.choice(qs) for _ in range(rng.randint(0, 5)))

    def request(self, hostile=True):
        """(bytes, method) of one request. Not hostile: a well-formed request (its values may still be odd), so that
        the requests pipelined after it are read too."""
        rng = self.rng
        if not hostile:
            saved = self.chance
            self.chance = lambda p: False if p <= 0.05 else saved(p)
            try:
                return self._request(hostile=False)
            finally:
                self.chance = saved
        return self._request(hostile=True)

    def _request(self, hostile):
        rng = self.rng
        if self.chance(0.01):  # not HTTP at all
            return self.noise(1, 300) + b"\r\n\r\n", b"?"
        if self.chance(0.003):
            return b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"PRI"
        method = self.method() if hostile else rng.choice([b"GET"] * 6 + [b"HEAD", b"OPTIONS", b"POST"])
        line = method + b" " + self.target(hostile)
        version = self.version() if hostile else b"HTTP/1.1"
        if version:
            line += b" " + version
        fields = [(b"Host", value) for value in self.host_fields(hostile)]
        if self.chance(0.3):
            fields.append((b"Range", self.range_value()))
        if self.chance(0.05):
            fields.append((b"If-Range", self.rng.choice([b'"x"', b'W/"x"', self.date_value()])))
        if self.chance(0.2):
            fields.append((b"If-None-Match", self.etag_value()))
        if self.chance(0.2):
            fields.append((b"If-Modified-Since", self.date_value()))
        if self.chance(0.35):
            fields.append((b"Accept-Encoding", self.encoding_value()))
            if self.chance(0.1):
                fields.append((b"Accept-Encoding", self.encoding_value()))
        if self.chance(0.08):
            fields.append((b"Connection", rng.choice([b"close", b"keep-alive", b"Upgrade, HTTP2-Settings", b"x, close"])))
        if self.chance(0.02):
            fields += [(b"Upgrade", b"h2c"), (b"HTTP2-Settings", b"AAMAAABkAARAAAAAAAIAAAAA")]
        if self.chance(0.02):
            fields.append((b"Expect", b"100-continue"))
        if self.chance(0.05):
            for _ in range(rng.randint(1, 40) if not self.chance(0.05) else rng.randint(1000, 20000)):
                fields.append((b"X-" + self.noise(1, 12, b"abcdefghijklmnop-"), self.noise(0, 40, b"abc 0123;=,\"")))
        if self.chance(0.005):
            fields.append((b"X-Big", b"v" * rng.randint(60_000, 120_000)))
        body = b""
        if method in (b"POST", b"PUT", b"PATCH") and self.chance(0.5):
            body = self.noise(0, 200, b"abcdef=&")
            fields.append((b"Content-Length", str(len(body)).encode()))
        if self.chance(0.15):
            rng.shuffle(fields)

        eol = b"\r\n"
        lines = [line] + [name + b": " + value for name, value in fields]
        if hostile and self.chance(0.1):  # one malformed thing
            kind = rng.randrange(12)
            if kind == 0:
                eol = b"\n"  # bare LF everywhere
            elif kind == 1:
                eol = b"\r"
            elif kind == 2:
                lines.append(b"X-Fold: a")
                lines.append(b" folded continuation")  # obs-fold
            elif kind == 3:
                lines.append(b"NoColonHere")
            elif kind == 4:
                lines.append(b"Host : 127.0.0.1")  # space before the colon
            elif kind == 5:  # TE + CL (smuggling shape)
                lines += [b"Content-Length: 4", b"Transfer-Encoding: chunked"]
                body = b"0\r\n\r\n"
            elif kind == 6:
                lines.append(b"Content-Length: " + rng.choice([b"-1", b"99999999999999999999", b"1, 2", b"0x10", b""]))
            elif kind == 7:
                lines += [b"Content-Length: 0", b"Content-Length: 5"]
            elif kind == 8:
                lines.append(b"Transfer-Encoding: chunked")
                body = rng.choice([b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\n", b"ffffffffffffffff\r\n", b"0\r\n\r\n"])
            elif kind == 9:
                lines.append(b"X-Nul: a\x00b")
            elif kind == 10:
                lines.append(b"X\x01Bad\tName: v")
            else:
                lines.insert(1, b"\tX-Leading-Whitespace: v")
            if kind == 1:
                return eol.join(lines) + eol + eol + body, method
        # A bare LF mixed into one line only, now and then.
        raw = eol.join(lines) + eol + eol + body
        if eol == b"\r\n" and self.chance(0.01):
            raw = raw.replace(b"\r\n", b"\n", 1)
        return raw, method


class Fuzzer:
    def __init__(self, args, stats, deadline, paths):
        self.args = args
        self.stats = stats
        self.deadline = deadline
        self.paths = paths

    def send(self, s, rng, data):
        """Sends data, now and then in pieces with short pauses (to exercise reassembly)."""
        if len(data) > 8 and rng.random() < 0.1:
            cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6))))
            start = 0
            for cut in cuts + [len(data)]:
                s.sendall(data[start:cut])
                start = cut
                time.sleep(rng.random() * 0.02)
        else:
            s.sendall(data)

    def read(self, s, responses, budget, cap=16 << 20):
        """Reads until the responses are settled, the peer closes, nothing arrives for --read-timeout, or budget ends.
        Returns False when the connection is finished (EOF or error)."""
        end = time.monotonic() + budget
        got = 0
        while not responses.settled:
            left = end - time.monotonic()
            if left <= 0 or got > cap:
                return True
            s.settimeout(min(self.args.read_timeout, left))
            try:
                data = s.recv(65536)
            except socket.timeout:
                return True
            except OSError:
                return False
            if not data:
                return False
            got += len(data)
            responses.feed(data)
        return True

    @staticmethod
    def batch(rng, gen, low, high):
        """Requests to pipeline: well-formed ones, and now and then one hostile request (often the last), since a
        server ends the connection at the first request it cannot parse."""
        count = rng.randint(low, high)
        hostile_at = -1
        if rng.random() < 0.35:
            hostile_at = count - 1 if rng.random() < 0.5 else rng.randrange(count)
        return [gen.request(hostile=(i == hostile_at)) for i in range(count)]

    def connection(self, rng, gen):
        mode = rng.choices(["keepalive", "pipeline", "stall", "halfclose"], weights=[45, 35, 10, 10])[0]
        responses = Responses()
        sent = 0
        error = None
        s = None
        try:
            s = connect(self.args.port, timeout=3.0)
            self.stats.add(connections=1)
            if mode == "keepalive":
                for _ in range(rng.randint(1, 6)):
                    data, method = gen.request()
                    self.send(s, rng, data)
                    sent += 1
                    responses.expect(method)
                    if not self.read(s, responses, 3.0) or time.monotonic() > self.deadline:
                        break
            elif mode == "pipeline":
                batch = self.batch(rng, gen, 1, 20)
                self.send(s, rng, b"".join(data for data, _ in batch))
                sent += len(batch)
                for _, method in batch:
                    responses.expect(method)
                self.read(s, responses, 5.0)
            elif mode == "stall":  # asks for more than it reads, then leaves (sometimes with a reset)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                batch = self.batch(rng, gen, 5, 30)
                for data, method in batch:
                    responses.expect(method)
                s.settimeout(2.0)
                try:
                    self.send(s, rng, b"".join(data for data, _ in batch))
                    sent += len(batch)
                except socket.timeout:
                    pass
                if rng.random() < 0.5:
                    s.settimeout(0.2)
                    try:
                        responses.feed(s.recv(rng.randint(1, 2048)))
                    except OSError:
                        pass
                time.sleep(rng.random() * 0.3)
                close_quietly(s, reset=rng.random() < 0.5)
                s = None
            else:  # halfclose: requests, then shutdown(SHUT_WR), then read to the end
                batch = self.batch(rng, gen, 1, 5)
                self.send(s, rng, b"".join(data for data, _ in batch))
                sent += len(batch)
                for _, method in batch:
                    responses.expect(method)
                s.shutdown(socket.SHUT_WR)
                self.read(s, responses, 5.0)
        except socket.timeout:
            error = "timeout"
        except ConnectionRefusedError:
            error = "refused"
            time.sleep(0.05)
        except OSError as caught:
            error = errno.errorcode.get(caught.errno, type(caught).__name__) if caught.errno else type(caught).__name__
        finally:
            if s is not None:
                close_quietly(s)
        answered = len([c for c in responses.statuses if not (100 <= c < 200 and c != 101)])
        self.stats.add(requests=sent, statuses=responses.statuses, error=error,
                       unanswered=max(0, sent - answered) if mode != "stall" else 0)

    def worker(self, index):
        rng = random.Random(f"{self.args.seed}-{index}")
        gen = Generator(rng, self.args.port, self.paths)
        while time.monotonic() < self.deadline:
            try:
                self.connection(rng, gen)
            except Exception as caught:  # noqa: BLE001 - a harness bug must not end the run
                self.stats.add(error=f"harness: {type(caught).__name__}")


def http_get(port, target=b"/", timeout=5.0):
    """A plain GET; returns the bytes received (at most 256 KiB), or None when nothing came."""
    chunks = []
    try:
        s = connect(port, timeout=timeout)
    except OSError:
        return None
    try:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
        total = 0
        while total < 256 * 1024:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
            total += len(data)
    except OSError:
        pass
    finally:
        close_quietly(s)
    return b"".join(chunks) or None


def discover_paths(port, extra):
    paths = [b"/"] + [p.encode() for p in extra]
    body = http_get(port) or b""
    for link in re.findall(rb'(?:href|src)\s*=\s*["\']([^"\'#]+)', body)[:50]:
        if link.startswith(b"http://") or link.startswith(b"https://"):
            link = b"/" + link.split(b"/", 3)[3] if link.count(b"/") >= 3 else b"/"
        elif not link.startswith(b"/"):
            link = b"/" + link
        paths.append(link)
    return sorted(set(paths))


def alive(port, pid):
    if pid is not None and rss_mb(pid) is None and not os.path.exists(f"/proc/{pid}"):
        return False
    for attempt in range(3):
        answer = http_get(port, timeout=5.0)
        if answer and re.match(rb"HTTP/1\.[01] \d{3} ", answer):
            return True
        time.sleep(1.0 + attempt)
    return False


def cmd_fuzz(args):
    stats = Stats()
    paths = discover_paths(args.port, args.paths or [])
    log(f"paths: {[p.decode('latin1') for p in paths]}")
    deadline = time.monotonic() + args.seconds
    fuzzer = Fuzzer(args, stats, deadline, paths)
    threads = [threading.Thread(target=fuzzer.worker, args=(i,), daemon=True) for i in range(max(1, args.workers))]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=1.0)
        if VERBOSE:
            log(f"requests={stats.requests} connections={stats.connections} statuses={dict(stats.statuses)}")
        if time.monotonic() > deadline + 30:  # a stuck worker does not hold the verdict back
            break
    up = alive(args.port, args.pid)
    emit({"requests": stats.requests, "connections": stats.connections, "alive": up,
          "statuses": dict(sorted(stats.statuses.items())), "unanswered": stats.unanswered,
          "errors": dict(stats.errors), "seed": args.seed})
    return 0 if up else 1


# MARK: - HTTP/2 streams that are never read


def cmd_h2streams(args):
    import ssl
    raise_nofile()
    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])

    def literal(name, value):
        return bytes([0, len(name)]) + name + bytes([len(value)]) + value

    block = (literal(b":method", b"GET") + literal(b":scheme", b"https") + literal(b":path", args.path.encode())
             + literal(b":authority", HOST.encode()))
    # The preface; SETTINGS with the largest initial stream window; the connection window opened as far; S HEADERS.
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4]) + (2**31 - 1).to_bytes(4, "big")
    preface += bytes([0, 0, 4, 8, 0, 0, 0, 0, 0]) + (2**31 - 1 - 65535).to_bytes(4, "big")
    for stream in range(1, 2 * args.streams, 2):
        preface += len(block).to_bytes(3, "big") + bytes([1, 5]) + stream.to_bytes(4, "big") + block
    base = rss_mb(args.pid)
    peak = base
    held, failed = [], 0
    for _ in range(args.connections):
        try:
            raw = socket.create_connection((HOST, args.port), timeout=10)
            tls = context.wrap_socket(raw, server_hostname=HOST)
            if tls.selected_alpn_protocol() != "h2":
                raise RuntimeError("no h2")
            tls.sendall(preface)
            held.append(tls)
        except Exception as error:  # noqa: BLE001
            failed += 1
            log(f"connection failed: {error!r}")
        current = rss_mb(args.pid)
        if current is not None:
            peak = max(peak or 0.0, current)
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        current = rss_mb(args.pid)
        if current is not None:
            peak = max(peak or 0.0, current)
        time.sleep(0.25)
    for tls in held:
        close_quietly(tls)
    emit({"connections": len(held), "streams": args.streams, "peak_rss_mb": r1(peak), "base_rss_mb": r1(base),
          "failed_connections": failed})
    return 0


# MARK: - main


def main(argv=None):
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    flood = sub.add_parser("flood", help="pipeline one request without reading; measure server RSS")
    flood.add_argument("--port", type=int, required=True)
    flood.add_argument("--pid", type=int, required=True, help="the server process, for /proc/PID/status")
    flood.add_argument("--request", default=r"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    flood.add_argument("--seconds", type=float, default=10.0)
    flood.add_argument("--limit-mb", type=float, default=600.0, help="stop once RSS grew by more than this (MiB)")

    slow = sub.add_parser("slowread", help="N connections that never read; count the ones the server closes")
    slow.add_argument("--port", type=int, required=True)
    slow.add_argument("--pid", type=int, required=True)
    slow.add_argument("--connections", type=int, default=10)
    slow.add_argument("--request", default=r"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    slow.add_argument("--seconds", type=float, default=30.0)
    slow.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)

    h2 = sub.add_parser("h2streams", help="N HTTP/2 connections over TLS, S streams each, never read; peak server RSS")
    h2.add_argument("--port", type=int, required=True)
    h2.add_argument("--pid", type=int, required=True)
    h2.add_argument("--ca", required=True, help="the CA file that signed the server's certificate")
    h2.add_argument("--connections", type=int, default=10)
    h2.add_argument("--streams", type=int, default=100)
    h2.add_argument("--path", default="/")
    h2.add_argument("--seconds", type=float, default=10.0)

    fuzz = sub.add_parser("fuzz", help="random and malformed requests, then check the server still answers")
    fuzz.add_argument("--port", type=int, required=True)
    fuzz.add_argument("--seconds", type=float, default=20.0)
    fuzz.add_argument("--seed", type=int, default=1)
    fuzz.add_argument("--workers", type=int, default=4, help="concurrent connections (default 4)")
    fuzz.add_argument("--paths", nargs="*", help="targets to use besides / and the links found in /")
    fuzz.add_argument("--pid", type=int, help="the server process; when gone, alive is false")
    fuzz.add_argument("--read-timeout", type=float, default=1.0, help="give up on a response after this idle time")

    args = parser.parse_args(argv)
    VERBOSE = args.verbose
    handler = {"flood": cmd_flood, "slowread": cmd_slowread, "h2streams": cmd_h2streams, "fuzz": cmd_fuzz}[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
