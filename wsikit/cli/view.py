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
    from ..look.viewer import ViewerSource, make_server, open_target

    source = open_target(args.target, mpp=args.mpp, layers=args.layer or (),
                         on_bad_tile=args.on_bad_tile)
    try:
        server = make_server(source, port=args.port)
    except BaseException:
        source.close()
        raise
    url = server.url  # carries the session token: only this URL is answered
    if isinstance(source, ViewerSource):
        print(f"wsikit view: {source.slide.name} at {url} (Ctrl-C to stop)", file=sys.stdout)
        print(f"deep zoom:   {server.dzi_url} (the same tiles for any DZI viewer)",
              file=sys.stdout, flush=True)
    else:
        print(f"wsikit view: {len(source.rows())} slide(s) of {source.root} at {url} (Ctrl-C "
              "to stop)", file=sys.stdout, flush=True)
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
        "view", help="pan and zoom a slide with its layers and regions in the browser",
        description="Serve the slide as Deep Zoom (DZI) tiles on 127.0.0.1 only, in "
                    "OpenSeadragon (shipped with wsikit, works offline): a stored JPEG tile "
                    "passed through where it is exactly the Deep Zoom tile, others read once. "
                    "Over it: the tissue outline, artefacts, heatmap layers (several at once, "
                    "opacity, threshold, palette, legend) and the regions; beside it a card "
                    "per region (crop, box, score, matched figures). Regions and the tissue "
                    "outline can be edited and saved as QuPath GeoJSON (under the slide's "
                    "lock; a file changed on disk since is never overwritten). An output "
                    "folder lists every slide with its thumbnail, QC and status. The printed "
                    "URL carries a random per-session token: the server answers only requests "
                    "with it (and only for its own address), so other users of the machine "
                    "and other web pages cannot read the slide. A slide file overwritten "
                    "while served is detected and no longer shown.")
    p.add_argument("target", metavar="SELECT_DIR|OUT_DIR|SLIDE",
                   help="a wsikit select result folder (OUT/select/<slide>/), an output or "
                        "batch job folder (every slide), or a slide file")
    p.add_argument("--layer", action="append", metavar="FILE",
                   help="a heatmap layer of per-patch scores: CSV (x, y, value columns) or "
                        "HDF5 (coords and a values dataset; TRIDENT and CLAM layouts read); "
                        "repeat for several. The output folder's importance or attention is "
                        "shown without it")
    p.add_argument("--port", type=non_negative_int, default=8765,
                   help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--mpp", type=mpp_type("--mpp"), default=None,
                   help="level-0 µm/px for a slide without it (shown only)")
    p.set_defaults(func=_run)
