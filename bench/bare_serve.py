"""`python -m bench.bare_serve APP --port P --workers N`: the bare app under adslot's own supervisor.

uvicorn's `--workers N` shares one listening socket, and the worker that wakes first accepts nearly every
keep-alive connection (src/adslot/workers.py says why); `adslot serve --workers N` gives each
worker a socket of its own (SO_REUSEPORT) instead. A bare app with N workers compared with adslot's N must
spread its connections the same way, so it runs under the same supervisor (adslot.workers), on the same
stack as bench/servers.py's bare_command: uvloop, httptools, no access log, lifespan on.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from adslot.workers import bound_socket, run_workers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_serve", description=__doc__.splitlines()[0])
    parser.add_argument("app", help="module:attribute of the ASGI app")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    config = uvicorn.Config(
        args.app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        lifespan="on",
    )
    run_workers(config, args.workers, bound_socket(args.host, args.port), lambda: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
