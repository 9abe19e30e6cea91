#!/usr/bin/env python3
"""Writes a WARC of N exchanges for the web-archive scale benchmark (scripts/bench-export.sh): a warcinfo record, then
for each exchange a response record (a page of about 500 bytes of text, its own ETag, a SHA-1 payload digest as crawlers
write it) and its request record (WARC-Concurrent-To), each in a gzip member of its own, as crawlers write them.
With BODY_BYTES, each page is that many bytes instead (a random block, the same for every page but for its number at
the start, stored in its gzip member at level 0: the large-archive run of docs/BENCHMARKS.md).
The same arguments give the same file. Usage: make-warc.py N OUTPUT.warc.gz [BODY_BYTES]"""
import base64
import gzip
import hashlib
import random
import sys
import uuid

count, output = int(sys.argv[1]), sys.argv[2]
body_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else None
rng = random.Random(5)
block = random.Random(7).randbytes(body_bytes) if body_bytes else b""
words = "offline bundle archive record response request header payload digest revisit".split()


def member(fields, content):
    head = "WARC/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in fields) + f"Content-Length: {len(content)}\r\n\r\n"
    return gzip.compress(head.encode() + content + b"\r\n\r\n", compresslevel=0 if body_bytes else 1, mtime=0)


def record_id():
    return f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128))}>"


date = "2026-11-30T00:00:00Z"
with open(output, "wb") as out:
    out.write(member([("WARC-Type", "warcinfo"), ("WARC-Record-ID", record_id()), ("WARC-Date", date),
                      ("Content-Type", "application/warc-fields")], b"software: scripts/make-warc.py\r\n"))
    for i in range(count):
        url = f"https://archive.example/{i % 1000}/{i}.html"
        if body_bytes:
            number = f"{i:016d}".encode()
            body = number + block[len(number):]
        else:
            body = ("<p>" + " ".join(rng.choice(words) for _ in range(60)) + f" {i}</p>").encode()
        http = (f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n"
                f"Date: Mon, 30 Nov 2026 00:00:00 GMT\r\nETag: \"{i:x}\"\r\n\r\n").encode() + body
        digest = "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()
        response = record_id()
        out.write(member([("WARC-Type", "response"), ("WARC-Record-ID", response), ("WARC-Date", date), ("WARC-Target-URI", url),
                          ("Content-Type", "application/http; msgtype=response"), ("WARC-Payload-Digest", digest)], http))
        request = f"GET /{i % 1000}/{i}.html HTTP/1.1\r\nHost: archive.example\r\nUser-Agent: make-warc\r\n\r\n".encode()
        out.write(member([("WARC-Type", "request"), ("WARC-Record-ID", record_id()), ("WARC-Date", date), ("WARC-Target-URI", url),
                          ("WARC-Concurrent-To", response), ("Content-Type", "application/http; msgtype=request")], request))
