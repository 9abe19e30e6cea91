#!/usr/bin/env python3
"""Where a ZIP's bytes go: entry data, local headers, the central directory and end records, and (for a bundle) the
data of index.bin and manifest.json apart from the bodies. Usage: zip-breakdown.py BUNDLE.zip PEER.zip
Prints, on one line, a sentence comparing the two in KiB and one on what changes to the format would save in the bundle."""
import os
import re
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


def what_if(path):
    """What two format changes would save, measured on this bundle: index.bin deflated (zlib level 9), and the time
    zlib takes to inflate it again at mount; manifest.json without the bodies' SHA-256 (which index.bin holds too)."""
    with zipfile.ZipFile(path) as z:
        index = z.read("index.bin")
        manifest = z.read("manifest.json")
        manifest_stored = z.getinfo("manifest.json").compress_size
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = deflater.compress(index) + deflater.flush()
    inflate = min(timeit.repeat(lambda: zlib.decompress(deflated, -15), number=1, repeat=3))
    without = re.sub(rb'"sha256": "[0-9a-f]{64}", ', b"", manifest)
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    slim = len(deflater.compress(without) + deflater.flush())
    return (
        f"What the format would have to change to save more, measured on this bundle: index.bin deflated (zlib 9) would be "
        f"{kib(len(deflated))} instead of {kib(len(index))}, and zlib takes {inflate * 1000:.1f} ms to inflate it at mount "
        f"(index.bin is stored so that mounting reads it as it lies); manifest.json without the bodies' SHA-256 "
        f"(index.bin holds them too) would be {kib(slim)} instead of {kib(manifest_stored)}."
    )


ours, peer = breakdown(sys.argv[1]), breakdown(sys.argv[2])
print(
    f"packager: bodies {kib(ours['bodies'])}, local headers {kib(ours['local'])}, central directory and end records "
    f"{kib(ours['central'])}, index.bin {kib(ours['index.bin'])}, manifest.json {kib(ours['manifest.json'])} (deflated); "
    f"bsdtar: file data {kib(peer['bodies'])}, local headers {kib(peer['local'])}, central directory and end records "
    f"{kib(peer['central'])} ({peer['entries']} entries, directories included). "
    + what_if(sys.argv[1])
)
