"""Pages beside the API: the playground (Swagger UI from a package, never a CDN), OpenAPI document, media."""

from __future__ import annotations

import importlib.util
import json
import mimetypes
import os
from pathlib import Path
from typing import Annotated, Any

from litestar import MediaType, Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.params import PathParameter
from litestar.serialization import encode_json

from adslot import routes
from adslot.api.adapters import env_of

PAGE = (Path(__file__).parent.parent / "playground" / "page.html").read_text(encoding="utf-8")
SIMULATOR = (Path(__file__).parent.parent / "playground" / "simulator.html").read_text(encoding="utf-8")
SIMULATOR_VENUE = "playground-simulator"
"""The sandbox venue the playground's screen simulator asks for (the sandbox fills any venue)."""
MEDIA_DIR = Path(__file__).parent.parent / "sandbox" / "assets"
ASSET_NAMES = frozenset({"swagger-ui.css", "swagger-ui-bundle.js"})
FileName = Annotated[str, PathParameter()]


def swagger_dist() -> Path:
    """Swagger UI 5's dist files ship in the flask-swagger-ui wheel; they are read without importing Flask."""
    spec = importlib.util.find_spec("flask_swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("flask-swagger-ui (Swagger UI assets) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "dist"


@get("/playground", include_in_schema=False, media_type=MediaType.HTML)
async def playground(request: Request[Any, Any, Any]) -> str:
    env = env_of(request)
    key = env.testing_key if env.name == "sandbox" else None
    note = " with the shared sandbox testing key pre-filled" if key else "; authorise with your key"
    return (
        PAGE.replace("__SIMULATOR__", _simulator(env.base_url, key) if key else "")
        .replace("__ENV__", env.name)
        .replace("__BASE__", env.base_url)
        .replace("__KEYNOTE__", note)
        .replace("__KEY__", json.dumps(key))
    )


def _simulator(base_url: str, key: str) -> str:
    """The screen simulator (sandbox only, where the key is public): the reference player in a small frame,
    one 10 s demo slot after another, and the events the server counted. The key goes in the fragment."""
    link = f"{base_url}/player/?slot=10&lead=12&status=30#key={key}&venue={SIMULATOR_VENUE}&screen=simulator"
    return SIMULATOR.replace("__PLAYER__", link).replace("__KEY__", json.dumps(key))


@get("/playground/assets/{name:str}", include_in_schema=False)
async def playground_asset(name: FileName) -> Response[bytes]:
    if name not in ASSET_NAMES:
        raise NotFoundException()
    path = swagger_dist() / name
    media_type = "text/css" if name.endswith(".css") else "application/javascript"
    return Response(
        path.read_bytes(), media_type=media_type, headers={"cache-control": "public, max-age=86400"}
    )


@get("/media/{name:str}", include_in_schema=False)
async def media(name: FileName) -> Response[bytes]:
    path = MEDIA_DIR / name
    if "/" in name or name.startswith(".") or not path.is_file():
        raise NotFoundException()
    return Response(
        path.read_bytes(),
        media_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
        headers={"cache-control": "public, max-age=86400"},
    )


@get("/healthz", include_in_schema=False)
async def health(request: Request[Any, Any, Any]) -> dict[str, str | int]:
    """Up, and which worker process answered (with --workers N, each has its own)."""
    return {"status": "ok", "environment": env_of(request).name, "worker_pid": os.getpid()}


@get("/openapi.json", include_in_schema=False)
async def openapi_document(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The environment's OpenAPI document: servers name its base URL, identifier limits its settings."""
    env = env_of(request)
    document: dict[str, Any] = request.app.openapi_schema.to_schema()
    document["servers"] = [{"url": env.base_url, "description": env.name}]
    for path in sorted(routes.AD_REQUEST_PATHS):
        operation = document.get("paths", {}).get(path, {}).get("post", {})
        body = (
            operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        )
        for name in ("venue_id", "screen_id"):
            if name in body.get("properties", {}):
                body["properties"][name]["maxLength"] = env.settings.max_id_length
    return Response(encode_json(document), media_type="application/json")


PAGE_ROUTES = [playground, playground_asset, media, health, openapi_document]
