"""Corpus ingestion: a folder of ≥ 1,000 documents into a figure bank, 1 and 2 workers.

Two parts, both on real inputs nobody here made:

1. **Duplicate threshold** (``--science``: folders of real articles with figures). Every
   captioned figure is extracted at 150 dpi (embedded bitmaps at their native pixels). The
   *same figure* pairs: each figure against its 100-dpi re-render (embedded bitmaps: shrunk to
   2/3 with Lanczos), its JPEG recompression (q 70), the re-render recompressed (q 50), and a
   copy cut with a wider white margin (3 % each side, q 60). The *different figure* pairs: every
   pair of figures of one paper, every pair across papers, and the four quadrants of each figure
   against each other (the panels of one figure, the hardest case). For each threshold: the
   share of same-figure pairs missed and of different-figure pairs merged (a pair counts as
   merged only when its shapes agree too, as in the bank).
2. **Ingestion** of a corpus folder built in ``--work``: every real PDF given (``--science``
   and ``--real``, e.g. the pdf.js test corpus: real files of every kind, damaged ones
   included), planted *repeats* (exact copies under other names, and "reprints": new PDFs
   holding re-rendered, recompressed real figures of a known article), hostile files (random
   bytes, truncated, encrypted, empty) and generated multi-page PDFs up to ``--n`` documents.
   Read with 1 and 2 worker processes (each into a fresh bank, one after the other on this
   machine): documents/s and pages/s, per core, per-document time (p50/p95/max), peak RSS of a
   worker and of the driver, repeats found (planted reprint figures linked to their true
   source: recall; links that are not the same figure: false merges, from a list to look at),
   and the cost of a rerun with everything done (resume).

Run::

    python benchmarks/bench_corpus_ingest.py --science /work/pdfset/pdfs tests/data/pdf \\
        --real PDFJS_DIR --work /tmp/corpus_bench --n 1200 --out RESULTS.md [--links DIR]
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import re
import shutil
import sqlite3
import sys
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wsikit.batch import ingest_corpus
from wsikit.evidence import read_pdf_figures, write_synthetic_pdf
from wsikit.evidence._phash import figure_hash, same_shape
from wsikit.evidence.corpus import CAPTION_BITS, DUPLICATE_BITS, captions_agree
from wsikit.evidence.nodes import FigureNode
from wsikit.evidence.synthetic_pdf import SyntheticFigure, synthetic_figures


# --------------------------------------------------------------------------- helpers
def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def shrink(image: np.ndarray, factor: float) -> np.ndarray:
    h, w = image.shape[:2]
    size = (max(8, round(w * factor)), max(8, round(h * factor)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


def margin(image: np.ndarray, frac: float) -> np.ndarray:
    h, w = image.shape[:2]
    ph, pw = max(1, int(h * frac)), max(1, int(w * frac))
    return np.pad(image, ((ph, ph), (pw, pw), (0, 0)), constant_values=255)


def science_pdfs(folders: list[Path]) -> list[Path]:
    seen: dict[int, Path] = {}
    for folder in folders:
        for pdf in sorted(folder.glob("*.pdf")):
            if pdf.stat().st_size:
                seen.setdefault(pdf.stat().st_size, pdf)  # the same article twice: once
    return sorted(seen.values(), key=lambda p: p.name)


def figures_of(pdfs: list[Path]) -> list[dict]:
    """Captioned figures at 150 and 100 dpi, paired by label and page."""
    out = []
    for pdf in pdfs:
        try:
            _, hi = read_pdf_figures(pdf, dpi=150)
            _, lo = read_pdf_figures(pdf, dpi=100)
        except Exception as exc:  # a damaged article: skipped, named
            print(f"  skipped {pdf.name}: {exc}", file=sys.stderr)
            continue
        low = {(f.figure_label, f.page): f for f in lo}
        for f in hi:
            g = low.get((f.figure_label, f.page))
            if g is None or min(f.image.shape[:2]) < 32:
                continue
            again = shrink(f.image, 2 / 3) if f.source == "embedded" else g.image
            out.append({"paper": pdf.name, "label": f.figure_label, "image": f.image,
                        "again": again, "source": f.source, "caption": f.caption})
    return out


# --------------------------------------------------------------------------- part 1
def _node(f: dict, label: str | None = None) -> FigureNode:
    return FigureNode(node_id="", image=Path("unused.png"), caption=f["caption"],
                      figure_label=f["label"] if label is None else label)


def threshold_table(figs: list[dict]) -> list[str]:
    """Distances of same-figure and different-figure pairs; missed and false links for
    thresholds of the hash alone and for the bank's rule."""
    # each pair: (distance, shapes agree, labels and captions agree)
    pos: list[tuple[int, bool, bool, str]] = []
    hashes = []
    panels: list[tuple[int, bool]] = []
    for f in figs:
        h = figure_hash(f["image"])
        hashes.append((f, h))
        for name, copy in (("re-render", f["again"]), ("JPEG q70", jpeg(f["image"], 70)),
                           ("re-render + JPEG q50", jpeg(f["again"], 50)),
                           ("wider margin + JPEG q60", margin(jpeg(f["again"], 60), 0.03))):
            c = figure_hash(copy)
            pos.append((h.distance(c), same_shape(h.aspect, c.aspect), True, name))
        im = f["image"]
        hh, ww = im.shape[0] // 2, im.shape[1] // 2
        quads = [figure_hash(q) for q in (im[:hh, :ww], im[:hh, ww:], im[hh:, :ww], im[hh:, ww:])]
        panels += [(a.distance(b), same_shape(a.aspect, b.aspect))
                   for a, b in itertools.combinations(quads, 2)]
    same_paper, other_paper = [], []
    for (fa, ha), (fb, hb) in itertools.combinations(hashes, 2):
        (same_paper if fa["paper"] == fb["paper"] else other_paper).append(
            (ha.distance(hb), same_shape(ha.aspect, hb.aspect),
             captions_agree(_node(fa), _node(fb))))
    groups = {"same paper": same_paper, "other papers": other_paper,
              "panels of one figure, one caption": [(d, s, True) for d, s in panels],
              "panels, lettered": [(d, s, False) for d, s in panels]}
    lines = [f"{len(figs)} real figures from {len({f['paper'] for f in figs})} articles "
             f"({sum(f['source'] == 'embedded' for f in figs)} embedded bitmaps, the others "
             "rendered vector/multi-image regions); "
             f"{len(pos)} same-figure pairs, "
             + ", ".join(f"{len(v)} {k} pairs" for k, v in list(groups.items())[:3]), "",
             "| copy | pairs | distance p50 | p95 | max |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(n for *_, n in pos):
        d = np.array([x for x, *_, n in pos if n == name])
        lines.append(f"| {name} | {len(d)} | {np.median(d):.0f} | {np.percentile(d, 95):.0f} | "
                     f"{d.max()} |")
    lines += ["", "| different figures | pairs | min distance (same shape) | p1 | labels and "
              "captions agree |", "|---|---|---|---|---|"]
    for k, v in list(groups.items())[:3]:
        d = np.array([x for x, _, _ in v])
        s = np.array([y for _, y, _ in v])
        lines.append(f"| {k} | {len(v)} | {d[s].min() if s.any() else '-'} | "
                     f"{np.percentile(d, 1):.0f} | {sum(a for _, _, a in v)} |")

    def rate(pairs: list, linked) -> str:
        n = sum(1 for p in pairs if linked(*p[:3]))
        return f"{n / max(1, len(pairs)):.2%} ({n})"

    def row(name: str, linked) -> str:
        return (f"| {name} | {rate(pos, lambda d, s, a: not linked(d, s, a))} | "
                f"{rate(pos, lambda d, s, a: not linked(d, s, False))} | "
                + " | ".join(rate(v, linked) for v in groups.values()) + " |")

    lines += ["", "| rule | missed same-figure pairs | missed, captions not compared | false "
              "links: same paper | other papers | panels, one caption | panels, lettered |",
              "|---|---|---|---|---|---|---|"]
    for t in (16, 24, 32, 40, 48, 56, 64):
        lines.append(row(f"hash alone, ≤ {t} bits", lambda d, s, a, t=t: s and d <= t))
    lines.append(row(f"**bank: ≤ {DUPLICATE_BITS}, or ≤ {CAPTION_BITS} with label and caption "
                     "agreeing**", lambda d, s, a: s and (d <= DUPLICATE_BITS
                                                          or d <= CAPTION_BITS and a)))
    return lines


# --------------------------------------------------------------------------- part 2
def encrypted_pdf(path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(60, 10, f"Figure 1. An encrypted test document: {path.stem}")
    pdf.set_encryption(owner_password="owner", user_password="user")
    pdf.output(str(path))


def build_corpus(work: Path, science: list[Path], real: list[Path], figs: list[dict],
                 n: int, seed: int = 0) -> dict:
    """The corpus folder and what was planted in it."""
    rng = np.random.default_rng(seed)
    corpus = work / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    (corpus / "real").mkdir(parents=True)
    docs = 0
    for pdf in science + real:
        target = corpus / "real" / pdf.name
        if target.exists():
            target = target.with_name(f"{pdf.stem}_{docs}.pdf")
        shutil.copyfile(pdf, target)
        docs += 1
    planted: dict = {"copies": [], "reprints": []}
    (corpus / "copies").mkdir()
    for pdf in science[:15]:  # the same file under another name
        shutil.copyfile(pdf, corpus / "copies" / f"copy_of_{pdf.name}")
        planted["copies"].append(pdf.name)
        docs += 1
    (corpus / "reprints").mkdir()
    by_paper: dict[str, list[dict]] = {}
    for f in figs:
        by_paper.setdefault(f["paper"], []).append(f)
    for k, (paper, items) in enumerate(sorted(by_paper.items())[:25]):
        chosen = items[:3]
        images = []
        for j, f in enumerate(chosen):  # a re-render or a smaller copy, recompressed
            base = f["again"] if j % 2 == 0 else shrink(f["image"], 0.75)
            images.append(jpeg(base, 75 if j % 2 == 0 else 60))
        figures = [SyntheticFigure(img, f"Figure {i + 1}. SYNTHETIC reprint of {paper}, "
                                        f"{chosen[i]['label']}.", page=i + 1, width_mm=120)
                   for i, img in enumerate(images)]
        out = corpus / "reprints" / f"reprint_{k:02d}.pdf"
        write_synthetic_pdf(out, figures, title=f"SYNTHETIC reprint {k} of {paper}",
                            doi=f"10.5555/wsikit.reprint.{k}")
        planted["reprints"].append({"file": out.name, "source": paper,
                                    "labels": [c["label"] for c in chosen]})
        docs += 1
    (corpus / "hostile").mkdir()
    sample = science[0].read_bytes()
    for i in range(5):
        (corpus / "hostile" / f"random_{i}.pdf").write_bytes(b"%PDF-1.5\n" + rng.bytes(4000 + i))
        (corpus / "hostile" / f"truncated_{i}.pdf").write_bytes(
            science[i % len(science)].read_bytes()[: len(sample) * (i + 2) // 10])
        (corpus / "hostile" / f"empty_{i}.pdf").write_bytes(b"")
        encrypted_pdf(corpus / "hostile" / f"encrypted_{i}.pdf")
        docs += 4
    planted["hostile"] = 20
    (corpus / "generated").mkdir()
    g = 0
    while docs < n:
        figures = synthetic_figures(seed=1000 + 7 * g)[:4]
        pages = 4 + g % 9
        placed = [SyntheticFigure(f.image, f.caption, page=1 + (i * pages) // 4,
                                  caption_position=f.caption_position)
                  for i, f in enumerate(figures)]
        write_synthetic_pdf(corpus / "generated" / f"generated_{g:04d}.pdf", placed,
                            title=f"SYNTHETIC generated paper {g}", doi=None, n_pages=pages)
        g += 1
        docs += 1
    planted["generated"] = g
    planted["documents"] = docs
    return planted


class PeakRss:
    """Peak resident memory (VmHWM) of this process's worker processes, sampled."""

    def __init__(self) -> None:
        self.worker = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _children(self) -> list[int]:
        me = str(os.getpid())
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me and b"resource_tracker" not in cmd:
                out.append(int(entry))
        return out

    @staticmethod
    def hwm(pid: int | str) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._children():
                self.worker = max(self.worker, self.hwm(pid))
            time.sleep(0.25)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def evaluate_links(bank: Path, planted: dict) -> dict:
    """Planted reprint figures linked to their source (recall) and every link's pair."""
    con = sqlite3.connect(bank / "bank.sqlite")
    docs = dict(con.execute("SELECT checksum, path FROM documents"))
    rows = con.execute("SELECT f.document, f.node, f.duplicate_of, f.distance, "
                       "(SELECT g.node FROM figures g WHERE g.node_id = f.duplicate_of AND "
                       "g.duplicate_of IS NULL) FROM figures f WHERE f.duplicate_of IS NOT NULL"
                       ).fetchall()
    links = []
    for doc, node, _, dist, canon in rows:
        n, c = json.loads(node), json.loads(canon)
        links.append({"doc": Path(docs[doc]).name, "label": n["figure_label"],
                      "image": n["image"], "canon_doc": Path(c["source_path"]).name,
                      "canon_label": c["figure_label"], "canon_image": c["image"],
                      "distance": dist})
    found = 0
    expected = 0
    for r in planted["reprints"]:
        mine = [x for x in links if x["doc"] == r["file"]]
        expected += len(r["labels"])
        found += sum(1 for x in mine if x["canon_doc"] == r["source"]
                     or x["canon_doc"].startswith("copy_of_") and r["source"] in x["canon_doc"])
    n_figs, = con.execute("SELECT COUNT(*) FROM figures").fetchone()
    con.close()
    return {"links": links, "planted": expected, "planted_found": found, "figures": n_figs}


def one_run(corpus: Path, bank: Path, workers: int, timeout: float) -> dict:
    """One ingestion and its rerun, in a fresh process (its peak memory is the driver's)."""
    import multiprocessing as mp

    result = bank.with_suffix(".json")
    proc = mp.get_context("spawn").Process(target=_one_run, args=(corpus, bank, workers,
                                                                   timeout, result))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"the run with {workers} worker(s) failed (exit {proc.exitcode})")
    return json.loads(result.read_text())


def _one_run(corpus: Path, bank: Path, workers: int, timeout: float, result: Path) -> None:
    result.write_text(json.dumps(_measure(corpus, bank, workers, timeout), default=float))


def _measure(corpus: Path, bank: Path, workers: int, timeout: float) -> dict:
    import resource

    if bank.exists():
        shutil.rmtree(bank)
    with PeakRss() as rss:
        t0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        summary = ingest_corpus(corpus, bank, workers=workers, timeout=timeout,
                                progress=False, echo=lambda _: None)
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
    # CPU time of the workers (reaped by the engine's stop) and of this driver
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    worker_cpu = children.ru_utime + children.ru_stime
    driver_cpu = me.ru_utime + me.ru_stime
    driver = PeakRss.hwm("self")
    t0 = time.perf_counter()
    again = ingest_corpus(corpus, bank, workers=workers, progress=False, echo=lambda _: None)
    resume = time.perf_counter() - t0
    t0 = time.perf_counter()  # every file read and hashed again (a moved corpus, --verify)
    ingest_corpus(corpus, bank, workers=workers, verify=True, progress=False,
                  echo=lambda _: None)
    resume_verify = time.perf_counter() - t0
    corpus_bytes = sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file())
    secs = np.array([d.seconds for d in summary.documents if d.processed and d.seconds])
    articles = [d for d in summary.documents if d.processed and d.status == "done"
                and "/real/" in d.path and d.figures]
    article_s = sum(d.cpu_seconds for d in articles)
    article_pages = sum(d.pages or 0 for d in articles)
    slowest = sorted(((d.seconds, Path(d.path).name) for d in summary.documents
                      if d.processed), reverse=True)[:5]
    images = sum(f.stat().st_size for f in (bank / "docs").rglob("*.png"))
    return {"workers": workers, "wall": wall, "counts": dict(summary.counts),
            "worker_cpu": worker_cpu, "driver_cpu": driver_cpu, "load": (load0, load1),
            "documents": len(summary.documents), "worker_rss": rss.worker, "driver_rss": driver,
            "resume": resume, "resume_verify": resume_verify, "corpus_bytes": corpus_bytes,
            "resume_counts": dict(again.counts), "p50": np.median(secs),
            "p95": np.percentile(secs, 95), "max": secs.max(), "slowest": slowest,
            "doc_seconds": float(secs.sum()), "image_bytes": images,
            "articles": len(articles), "article_seconds": article_s,
            "article_pages": article_pages,
            "article_figures": sum(d.figures for d in articles),
            "db_bytes": (bank / "bank.sqlite").stat().st_size,
            "failed": [d.message.replace(d.path, "<file>") for d in summary.documents
                       if d.status == "failed"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--science", nargs="+", type=Path, required=True,
                    help="folders of real articles with figures")
    ap.add_argument("--real", nargs="*", type=Path, default=[],
                    help="folders of further real PDFs (any kind)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--n", type=int, default=1200, help="documents in the corpus")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--links", type=Path, default=None,
                    help="write side-by-side PNGs of every link not planted, to look at")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    science = science_pdfs(args.science)
    real = sorted(p for folder in args.real for p in folder.glob("*.pdf"))
    print(f"{len(science)} real articles, {len(real)} further real PDFs", flush=True)
    t0 = time.perf_counter()
    figs = figures_of(science)
    lines = ["## Duplicate threshold on real figures", ""]
    lines += threshold_table(figs)
    print(f"threshold part: {time.perf_counter() - t0:.0f} s", flush=True)
    planted = build_corpus(args.work, science, real, figs, args.n)
    corpus = args.work / "corpus"
    print(f"corpus: {planted['documents']} documents", flush=True)
    runs = []
    for w in args.workers:
        runs.append(one_run(corpus, args.work / f"bank{w}", w, args.timeout))
        print(json.dumps({k: v for k, v in runs[-1].items() if k != "failed"}, default=str),
              flush=True)
    ev = evaluate_links(args.work / f"bank{args.workers[-1]}", planted)
    lines += ["", "## Ingestion", "",
              f"Corpus: {planted['documents']} documents = {len(science)} real articles + "
              f"{len(real)} further real PDFs (pdf.js test corpus) + {len(planted['copies'])} "
              f"exact copies + {len(planted['reprints'])} reprints of real articles "
              f"({ev['planted']} re-rendered real figures) + {planted['hostile']} hostile files "
              f"+ {planted['generated']} generated multi-page PDFs.", "",
              "| workers | wall s | load avg (start, end) | docs done | failed | same file | "
              "figures | pages | docs/s | pages/s | workers' CPU s (driver) | per CPU-second "
              "of a worker: docs, pages | p50 / p95 / max s per doc | peak RSS worker / driver "
              "MiB | rerun, all done: s (with --verify) |", "|" + "---|" * 15]
    for r in runs:
        c = r["counts"]
        lines.append(
            f"| {r['workers']} | {r['wall']:.0f} | {r['load'][0]:.1f}, {r['load'][1]:.1f} | "
            f"{c['done']} | {c['failed']} | {c['skipped']}"
            f" | {c['figures']} | {c['pages']} | {c['done'] / r['wall']:.2f} | "
            f"{c['pages'] / r['wall']:.1f} | {r['worker_cpu']:.0f} ({r['driver_cpu']:.0f}) | "
            f"{c['done'] / r['worker_cpu']:.2f}, {c['pages'] / r['worker_cpu']:.1f} | "
            f"{r['p50']:.2f} / {r['p95']:.2f} / {r['max']:.1f} | "
            f"{r['worker_rss'] / 2**20:.0f} / {r['driver_rss'] / 2**20:.0f} | "
            f"{r['resume']:.2f} ({r['resume_verify']:.1f}) |")
    last = runs[-1]
    page_rate = last["article_pages"] / max(1e-9, last["article_seconds"])
    lines += ["", f"Documents with figures among the real PDFs ({last['articles']}, "
              f"{last['article_pages']} pages, {last['article_figures']} figures): "
              f"{last['article_seconds'] / max(1, last['articles']):.2f} CPU-seconds of a "
              f"worker per document, {page_rate:.1f} pages per CPU-second (reading, "
              "rendering, writing the images, hashing).",
              f"Slowest documents ({last['workers']} workers): "
              + ", ".join(f"{n} {s:.1f} s" for s, n in last["slowest"]),
              f"Corpus: {last['corpus_bytes'] / 2**20:.0f} MiB. "
              f"Storage: {last['image_bytes'] / 2**20:.0f} MiB of figure PNGs for "
              f"{last['counts']['figures']} figures "
              f"({last['image_bytes'] / max(1, last['counts']['figures']) / 1024:.0f} KiB each), "
              f"bank.sqlite {last['db_bytes'] / 2**20:.1f} MiB.",
              f"Repeats: {len(ev['links'])} figures linked; planted reprint figures linked to "
              f"their true source: {ev['planted_found']} of {ev['planted']}.", "",
              "Failed documents, by reason:", ""]
    reasons: dict[str, int] = {}
    for msg in last["failed"]:
        key = re.sub(r"/\S+", "<path>", msg)[:150]
        reasons[key] = reasons.get(key, 0) + 1
    lines += [f"- {n} × {k}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    lines += ["", "Links that were not planted (to look at), by the figure they repeat:", ""]
    planted_docs = {r["file"] for r in planted["reprints"]}
    groups: dict[tuple[str, str], list[dict]] = {}
    for x in ev["links"]:
        if x["doc"] not in planted_docs:
            groups.setdefault((x["canon_doc"], x["canon_label"]), []).append(x)
    for (doc, label), xs in sorted(groups.items()):
        lines.append(f"- {doc} {label}: repeated in {len(xs)} document(s) ("
                     + ", ".join(sorted({x['doc'] for x in xs})) + "), "
                     f"{min(x['distance'] for x in xs)}–{max(x['distance'] for x in xs)} bits")
    if args.links:
        args.links.mkdir(parents=True, exist_ok=True)
        bank = args.work / f"bank{args.workers[-1]}"
        for i, x in enumerate(ev["links"]):
            a = Image.open(bank / x["image"]).convert("RGB")
            b = Image.open(bank / x["canon_image"]).convert("RGB")
            h = 300
            a = a.resize((max(1, a.width * h // a.height), h))
            b = b.resize((max(1, b.width * h // b.height), h))
            pair = Image.new("RGB", (a.width + b.width + 10, h), "white")
            pair.paste(a, (0, 0))
            pair.paste(b, (a.width + 10, 0))
            pair.save(args.links / f"link_{i:03d}_{x['distance']}.png")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
