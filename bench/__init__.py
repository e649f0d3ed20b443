"""adslot's load benchmark: adslot against a bare ASGI app on the same stack, driven by wrk on loopback.

Run `python -m bench` from the repository root; see bench/README.md.
"""
