"""`errorkb serve`: build, preview the site on localhost, rebuild when content or templates
change, and reload the browser.

The reload is a few lines of polling JavaScript added to HTML responses by this server only;
the built files never contain it.
"""

from __future__ import annotations

import argparse
import http.server
import re
import sys
import threading
import time
from functools import partial
from pathlib import Path

from generator.build import build, inputs_of
from generator.commands.build import add_site_options
from generator.commands.common import config_of
from generator.errors import ErrorkbError
from generator.render import TEMPLATES

VERSION_PATH = "/__errorkb/version"
RELOAD = (
    "<script>(function(){var v=null;setInterval(function(){fetch('" + VERSION_PATH + "').then(function(r){return r.text()})"
    ".then(function(t){if(v!==null&&t!==v){location.reload()}v=t}).catch(function(){})},1000)})();</script>"
)
_API_EXTENSIONLESS = re.compile(r"^/api/errors/([0-9a-f]{16})/?$")


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "serve",
        help="preview the site on localhost, rebuilding on changes",
        description="Build the site, serve it on localhost, rebuild when content/ or templates/ change and "
        "reload the browser. /api/errors/<id> is served as JSON, as hosts honouring _redirects do.",
    )
    add_site_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("--no-build", action="store_true", help="serve the existing site without building it first")
    parser.set_defaults(run=run)


class Preview:
    """The served folder, the build that refreshes it, and a version the browser polls."""

    def __init__(self, rebuild, watched: tuple[Path, ...]) -> None:
        self.rebuild, self.watched = rebuild, watched
        self.version = 0
        self._seen = self._snapshot()

    def _snapshot(self) -> tuple:
        state = []
        for folder in self.watched:
            for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
                if path.is_file():
                    stat = path.stat()
                    state.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(state)

    def poll(self) -> bool:
        """Rebuild once if a watched file changed since the last look; True when it did."""
        current = self._snapshot()
        if current == self._seen:
            return False
        self._seen = current
        try:
            self.rebuild()
            self.version += 1
        except ErrorkbError as error:
            print(f"errorkb: {error}", file=sys.stderr)
        return True


class Handler(http.server.SimpleHTTPRequestHandler):
    preview: Preview

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        path = self.path.split("?", 1)[0]
        if path == VERSION_PATH:
            return self._send(200, "text/plain", str(self.preview.version).encode())
        match = _API_EXTENSIONLESS.match(path)
        if match:
            target = Path(self.directory) / "api" / "errors" / f"{match[1]}.json"
            if target.is_file():
                return self._send(200, "application/json; charset=utf-8", target.read_bytes())
        file = Path(self.translate_path(path))
        if file.is_dir():
            file = file / "index.html"
        if file.suffix == ".html" and file.is_file() and not path.endswith(".html") and not path.endswith("/"):
            self.send_response(301)
            self.send_header("Location", path + "/")
            self.end_headers()
            return None
        if file.suffix == ".html" and file.is_file():
            return self._send(200, "text/html; charset=utf-8", _with_reload(file.read_bytes()))
        if not file.exists():
            missing = Path(self.directory) / "404.html"
            body = _with_reload(missing.read_bytes()) if missing.is_file() else b"not found\n"
            return self._send(404, "text/html; charset=utf-8", body)
        return super().do_GET()

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:
        pass


def _with_reload(html: bytes) -> bytes:
    return html.replace(b"</body>", RELOAD.encode() + b"</body>", 1)


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    inputs = inputs_of(config, args.source, args.out, args.content, args.cache_dir)

    def rebuild() -> None:
        result = build(config, inputs)
        print(f"build: {result.errors} errors, {result.written} files changed", file=sys.stderr)

    if not args.no_build:
        rebuild()
    preview = Preview(rebuild, (inputs.content, TEMPLATES))
    handler = type("PreviewHandler", (Handler,), {"preview": preview})
    server = http.server.ThreadingHTTPServer((args.host, args.port), partial(handler, directory=str(inputs.out)))
    print(f"serving {inputs.out} at http://{args.host}:{server.server_port}/ (Ctrl-C stops)", file=sys.stderr)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        while True:
            time.sleep(1)
            preview.poll()
    finally:
        server.shutdown()
