"""What every answer carries, whichever lane writes it: the request id (request_ids.py) and, on the
player-facing paths, the CORS headers a browser needs (cors.py). `EdgeHeaders` (headers.py) reads both off a
request once; the hot lane (api/protocol.py) and the ASGI lane (asgi.py, around every app) call it alike."""
