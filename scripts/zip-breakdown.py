#!/usr/bin/env python3
"""Where a ZIP's bytes go: entry data, local headers, the central directory and end records, and (for a bundle) the
data of index.bin and manifest.json apart from the bodies. Usage: zip-breakdown.py BUNDLE.zip PEER.zip
Prints, on one line, a sentence comparing the two in KiB and one on how the bundle stores index.bin."""
import os
import sys
import timeit
import zipfile
import zlib


def breakdown(path):
    size = os.path.getsize(path)
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        data = {"index.bin": 0, "manifest.json": 0, "signature.json": 0}
        bodies = 0
        local = 0
        for info in infos:
            # The local header: 30 bytes, the name and the local extra (read from the file: it may differ from the
            # central one).
            with open(path, "rb") as f:
                f.seek(info.header_offset + 26)
                name_length = int.from_bytes(f.read(2), "little")
                extra_length = int.from_bytes(f.read(2), "little")
            local += 30 + name_length + extra_length
            if info.filename in data:
                data[info.filename] = info.compress_size
            else:
                bodies += info.compress_size
        central = size - local - bodies - sum(data.values())
    return {"entries": len(infos), "bodies": bodies, "local": local, "central": central, **data}


def kib(n):
    return f"{n / 1024:.0f} KiB"


def index_note(path):
    """How index.bin lies in the bundle: deflated (format version 3) or stored, its size inflated, and the time zlib
    takes to inflate it, which a mount pays."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("index.bin")
        if info.compress_type != zipfile.ZIP_DEFLATED:
            return f"index.bin is stored ({kib(info.file_size)})."
        with open(path, "rb") as f:
            f.seek(info.header_offset + 26)
            name_length = int.from_bytes(f.read(2), "little")
            extra_length = int.from_bytes(f.read(2), "little")
            f.seek(info.header_offset + 30 + name_length + extra_length)
            stream = f.read(info.compress_size)
    inflate = min(timeit.repeat(lambda: zlib.decompress(stream, -15), number=1, repeat=3))
    return (
        f"index.bin is deflated: {kib(info.compress_size)} for {kib(info.file_size)} of index, which zlib inflates in "
        f"{inflate * 1000:.1f} ms at mount (a mount pays it; it is part of the mount row)."
    )


ours, peer = breakdown(sys.argv[1]), breakdown(sys.argv[2])
print(
    f"packager: bodies {kib(ours['bodies'])}, local headers {kib(ours['local'])}, central directory and end records "
    f"{kib(ours['central'])}, index.bin {kib(ours['index.bin'])}, manifest.json {kib(ours['manifest.json'])} (deflated); "
    f"bsdtar: file data {kib(peer['bodies'])}, local headers {kib(peer['local'])}, central directory and end records "
    f"{kib(peer['central'])} ({peer['entries']} entries, directories included). "
    + index_note(sys.argv[1])
)
