"""``wsikit view``: the slide and its selected regions in a local browser viewer."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ._common import mpp_type, non_negative_int

__all__ = ["open_browser", "register"]


def _run(args: argparse.Namespace) -> int:
    from ..look.viewer import ViewerSource, make_server

    source = ViewerSource.open(args.target, mpp=args.mpp)
    try:
        server = make_server(source, port=args.port)
    except BaseException:
        source.close()
        raise
    url = server.url  # carries the session token: only this URL is answered
    print(f"wsikit view: {source.slide.name} at {url} (Ctrl-C to stop)", file=sys.stdout,
          flush=True)
    opener = None if args.no_browser else open_browser(url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        source.close()
        if opener is not None:
            shutil.rmtree(opener, ignore_errors=True)
    return 0


def open_browser(url: str) -> Path:
    """Open ``url`` through a redirect page only this user can read (a browser's command
    line, which every local user sees in ``ps``, must not carry the session token); returns
    the private folder of the page, removed when the server stops."""
    import html
    import tempfile
    import webbrowser

    folder = Path(tempfile.mkdtemp(prefix="wsikit-view-"))  # mode 0700
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={html.escape(url)}">'
                 f'<a href="{html.escape(url)}">wsikit view</a>\n')
    webbrowser.open(page.as_uri())
    return folder


def register(subparsers: Any) -> None:
    """Add ``wsikit view``."""
    p = subparsers.add_parser(
        "view", help="pan and zoom a slide with its regions in the browser",
        description="Serve the slide as deep-zoom tiles read on demand at every level, on "
                    "127.0.0.1 only, with the tissue outlines, the importance heatmap and the "
                    "windows (rank and scale) over it, and beside it a card per region (crop, "
                    "box, score, matched figures); click a card to fly to its region. Works "
                    "offline. The printed URL carries a random per-session token: the server "
                    "answers only requests with it (and only for its own address), so other "
                    "users of the machine and other web pages cannot read the slide.")
    p.add_argument("target", metavar="SELECT_DIR|SLIDE",
                   help="a wsikit select result folder (OUT/select/<slide>/) or a slide file")
    p.add_argument("--port", type=non_negative_int, default=8765,
                   help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--mpp", type=mpp_type("--mpp"), default=None,
                   help="level-0 µm/px for a slide without it (shown only)")
    p.set_defaults(func=_run)
