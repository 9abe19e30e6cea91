#!/usr/bin/env python3
"""A TCP proxy that delays every chunk by a fixed time in each direction, to add round-trip latency.

Used by scripts/bench-verify.sh when the kernel has no netem qdisc (tc ... netem fails with
"Specified qdisc kind is unknown"). Usage: delay-proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT ONE_WAY_MS
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    """Forwards what `reader` receives to `writer`, each chunk `delay` seconds after it arrived: reading goes on while
    earlier chunks wait, so the link adds latency without limiting its bandwidth."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def receive():
        try:
            while True:
                data = await reader.read(65536)
                await queue.put((loop.time() + delay, data))
                if not data:
                    break
        except (ConnectionError, asyncio.CancelledError):
            await queue.put((loop.time(), b""))

    receiving = asyncio.ensure_future(receive())
    try:
        while True:
            due, data = await queue.get()
            # Chunks keep their order: each waits until its own due time, then is written.
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        receiving.cancel()
        try:
            writer.close()
        except Exception:
            pass


async def handle(client_reader, client_writer, host, port, delay):
    try:
        server_reader, server_writer = await asyncio.open_connection(host, port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, server_writer, delay), pipe(server_reader, client_writer, delay))


async def main():
    listen, host, port, ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    server = await asyncio.start_server(lambda r, w: handle(r, w, host, port, ms / 1000), "127.0.0.1", listen, backlog=1024)
    async with server:
        await server.serve_forever()


asyncio.run(main())
