"""Document parsers by measurement: text quality and speed of PDF and HTML libraries on Debian's documentation.

    python benchmarks/parsers.py --fetch            # apt-get download + dpkg-deb -x of PACKAGES into --root
    PYTHONPATH=src OMP_NUM_THREADS=1 nice python benchmarks/parsers.py   # docs/benchmarks/parsers.json

The set (re-fetchable: the Debian packages in PACKAGES, bookworm): every PDF they hold, every `--html-step`-th
HTML file in sorted order (symlinks left out), and the DOCX / PPTX fixtures of tests/fixtures/documents.

1. amsrag's own path over the whole set (parse, then chunk at headings): per format files, pages, skipped files
   by reason, parse pages/s (PDF, slides) or files/s and MB/s (HTML, DOCX), chunked passages/s, on one core.
2. PDF libraries (pypdfium2, pypdf, pdfminer.six, pdftext): seconds per page over the comparison set (three
   manuals whole, and the first `--pdf-pages` pages of every `--pdf-step`-th other PDF), and text quality on the
   three manuals that Debian also ships as HTML: word recall and precision of each library's text against the
   manual's HTML text (amsrag's HTML path; multisets of lower-cased words), and the share of broken words
   (a word the PDF splits or glues that the HTML never has, among the PDF's words not in the HTML).
3. Page numbers: 50 passages drawn from the PDFs, each checked against PDFium's raw text of its pages.
4. HTML extractors (amsrag's selectolax walker, trafilatura, selectolax body text as the floor) on the Debian
   Policy pages against their reStructuredText sources (shipped beside them): word recall / precision, and
   the share of the source's section titles that come out as headings; files/s over the HTML sample.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from amsrag.config import cache_root  # noqa: E402

PACKAGES = ("debian-reference-en", "debian-reference-common", "debian-handbook", "apt-doc", "debian-faq",
            "debian-policy", "developers-reference", "maint-guide", "harden-doc", "debian-kernel-handbook",
            "texlive-latex-recommended-doc", "octave-doc", "gnuplot-doc")
# (PDF, its HTML chapters) of the manuals Debian ships in both forms
MANUALS = (
    ("usr/share/debian-reference/debian-reference.en.pdf", "usr/share/debian-reference/*.en.html"),
    ("usr/share/developers-reference/developers-reference.pdf", "usr/share/developers-reference/*.html"),
    ("usr/share/doc/maint-guide/maint-guide.en.pdf", "usr/share/doc/maint-guide/html/*.en.html"),
)
POLICY = "usr/share/doc/debian-policy/policy.html"
_WORD = re.compile(r"[^\W_]{2,}")


def fetch(root: Path) -> None:
    debs = root / "deb"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root / "root")], check=True)
    versions = {d.name.split("_")[0]: d.name.split("_")[1] for d in debs.glob("*.deb")}
    (root / "versions.json").write_text(json.dumps(versions, indent=1))


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def overlap(got: Counter[str], truth: Counter[str]) -> dict[str, float]:
    common = sum((got & truth).values())
    return {"recall": round(common / max(sum(truth.values()), 1), 4),
            "precision": round(common / max(sum(got.values()), 1), 4)}


# ---------------------------------------------------------------- the set


def the_set(root: Path, html_step: int) -> list[tuple[Path, str]]:
    files: list[tuple[Path, str]] = [(p, "pdf") for p in sorted(root.rglob("*.pdf")) if not p.is_symlink()]
    html = [p for p in sorted(root.rglob("*.html")) if not p.is_symlink() and p.is_file()]
    files += [(p, "html") for p in html[::html_step]]
    fixtures = ROOT / "tests" / "fixtures" / "documents"
    files += [(p, "docx") for p in sorted(fixtures.glob("*.docx"))]
    files += [(p, "pptx") for p in sorted(fixtures.glob("*.pptx"))]
    return files


def amsrag_path(files: list[tuple[Path, str]]) -> dict[str, Any]:
    from amsrag.embed.tokens import TokenCounter
    from amsrag.ingest.blocks import document_passages
    from amsrag.ingest.parsers import SkippedDocument, parse_document

    counter = TokenCounter()
    out: dict[str, dict[str, Any]] = {}
    for path, fmt in files:
        row = out.setdefault(fmt, {"files": 0, "indexed": 0, "skipped": Counter(), "skipped_files": [], "pages": 0,
                                   "bytes": 0, "parse_s": 0.0, "chunk_s": 0.0, "passages": 0, "chars": 0})
        row["files"] += 1
        row["bytes"] += path.stat().st_size
        t = time.process_time()
        try:
            doc = parse_document(path, fmt)
        except SkippedDocument as exc:
            row["parse_s"] += time.process_time() - t
            row["skipped"][exc.reason.split(" (")[0]] += 1
            row["skipped_files"].append(str(path))
            continue
        row["parse_s"] += time.process_time() - t
        row["pages"] += doc.pages or 0
        row["chars"] += sum(len(b.text) for b in doc.blocks)
        t = time.process_time()
        passages = document_passages(doc, path.name, path.name, fmt, counter=counter)
        row["chunk_s"] += time.process_time() - t
        row["passages"] += len(passages)
        row["indexed"] += bool(passages)
    for row in out.values():
        row["skipped"] = dict(row["skipped"])
        row["files_per_s"] = round(row["files"] / row["parse_s"], 1)
        row["mb_per_s"] = round(row["bytes"] / (1 << 20) / row["parse_s"], 2)
        if row["pages"]:
            row["pages_per_s"] = round(row["pages"] / row["parse_s"], 1)
        row["passages_per_s_chunking"] = round(row["passages"] / max(row["chunk_s"], 1e-9), 1)
        row["parse_s"], row["chunk_s"] = round(row["parse_s"], 2), round(row["chunk_s"], 2)
    return out


def raw_page(doc: Any, page: int, squash: Callable[[str], str]) -> str:
    textpage = doc[page - 1].get_textpage()
    return squash(textpage.get_text_range().replace("\ufffe", "").replace("\x02", ""))


def page_check(files: list[tuple[Path, str]], n: int, seed: int = 38) -> dict[str, Any]:
    """`n` passages drawn (seeded) from the set's PDFs: is the passage's first line (up to 40 letters and
    digits) on its `page` and its last on its `page_end` (or `page`) in PDFium's raw text of that page?
    Letters and digits only, so joins of hyphenated words and of lines do not count against it."""
    import random

    import pypdfium2 as pdfium

    from amsrag.embed.tokens import TokenCounter
    from amsrag.ingest.blocks import document_passages
    from amsrag.ingest.parsers import SkippedDocument, parse_document

    def squash(text: str) -> str:
        return "".join(c for c in text.lower() if c.isalnum())

    rng = random.Random(seed)
    pdfs = [p for p, fmt in files if fmt == "pdf"]
    counter = TokenCounter()
    checked: list[dict[str, Any]] = []
    while len(checked) < n:
        path = rng.choice(pdfs)
        try:
            passages = document_passages(parse_document(path, "pdf"), path.name, path.name, "pdf", counter=counter)
        except SkippedDocument:
            continue
        p = rng.choice(passages)
        lines = [line for line in p.text.splitlines() if squash(line)] or [p.text]
        first, last = squash(lines[0])[:40], squash(lines[-1])[-40:]
        doc = pdfium.PdfDocument(str(path))
        try:
            start, end = p.metadata["page"], p.metadata.get("page_end", p.metadata["page"])
            ok = first in raw_page(doc, start, squash) and last in raw_page(doc, end, squash)
        finally:
            doc.close()
        checked.append({"file": path.name, "page": start, "page_end": end, "right": ok})
    return {"sampled": n, "right": sum(c["right"] for c in checked),
            "wrong": [c for c in checked if not c["right"]]}


# ---------------------------------------------------------------- PDF libraries


def pdfium_pages(path: Path, pages: int) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        out = []
        for i in range(min(pages, len(doc))):
            page = doc[i]
            textpage = page.get_textpage()
            out.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return out
    finally:
        doc.close()


def pypdf_pages(path: Path, pages: int) -> list[str]:
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    return [reader.pages[i].extract_text() or "" for i in range(min(pages, len(reader.pages)))]


def pdfminer_pages(path: Path, pages: int) -> list[str]:
    from pdfminer.high_level import extract_text

    return extract_text(str(path), maxpages=pages).split("\f")


def pdftext_pages(path: Path, pages: int) -> list[str]:
    import pypdfium2 as pdfium
    from pdftext.extraction import paginated_plain_text_output

    doc = pdfium.PdfDocument(str(path))
    n = min(pages, len(doc))
    doc.close()
    return list(paginated_plain_text_output(str(path), page_range=list(range(n)), workers=1))


def amsrag_pdf_text(path: Path, pages: int) -> list[str]:
    from amsrag.ingest.blocks import extracted_text
    from amsrag.ingest.parsers import ParseBudget, parse_document

    return [extracted_text(parse_document(path, "pdf", ParseBudget(max_pages=100_000, ocr_pages=0)))]


PDF_LIBRARIES: dict[str, Callable[[Path, int], list[str]]] = {
    "pypdfium2": pdfium_pages, "pypdf": pypdf_pages, "pdfminer.six": pdfminer_pages, "pdftext": pdftext_pages}


def html_truth(root: Path, pattern: str) -> str:
    from amsrag.ingest.blocks import extracted_text
    from amsrag.ingest.parsers import parse_document

    return "\n".join(extracted_text(parse_document(p, "html")) for p in sorted(root.glob(pattern)))


def broken_share(got: Counter[str], truth: Counter[str]) -> float:
    """Of the PDF's words that the HTML never has, the share that are two HTML words glued or one split."""
    vocab = set(truth)
    foreign = [w for w in got if w not in vocab]
    if not foreign:
        return 0.0
    glued = sum(1 for w in foreign if any(w[:i] in vocab and w[i:] in vocab for i in range(2, len(w) - 1)))
    return round(glued / len(foreign), 4)


def compare_pdf(root: Path, pdf_step: int, pdf_pages: int) -> dict[str, Any]:
    manuals = [(root / pdf, pattern) for pdf, pattern in MANUALS if (root / pdf).exists()]
    others = [p for p in sorted(root.rglob("*.pdf")) if p not in {m for m, _ in manuals}][::pdf_step]
    out: dict[str, Any] = {"manuals": [str(m.relative_to(root)) for m, _ in manuals],
                           "other_pdfs": len(others), "first_pages_of_others": pdf_pages, "libraries": {}}
    truths = {m: words(html_truth(root, pattern)) for m, pattern in manuals}
    for name, extract in {**PDF_LIBRARIES, "amsrag (pypdfium2 + cleaning)": amsrag_pdf_text}.items():
        pages, seconds, errors = 0, 0.0, 0
        quality: dict[str, Any] = {}
        got_all: Counter[str] = Counter()
        truth_all: Counter[str] = Counter()
        for path, limit in [(m, 100_000) for m, _ in manuals] + [(p, pdf_pages) for p in others]:
            t = time.process_time()
            try:
                texts = extract(path, limit)
            except Exception as exc:  # a library failing on a file is counted, the run goes on
                errors += 1
                print(f"{name}: {path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            seconds += time.process_time() - t
            if name.startswith("amsrag"):
                import pypdfium2 as pdfium

                doc = pdfium.PdfDocument(str(path))
                pages += len(doc)  # amsrag reads whole documents
                doc.close()
            else:
                pages += len(texts)
            if path in truths:
                got = words("\n".join(texts))
                got_all += got
                truth_all += truths[path]
                quality[path.name] = {**overlap(got, truths[path]), "broken": broken_share(got, truths[path])}
        out["libraries"][name] = {"pages": pages, "seconds": round(seconds, 2),
                                  "pages_per_s": round(pages / max(seconds, 1e-9), 1), "errors": errors,
                                  "manuals": quality, "all_manuals": {**overlap(got_all, truth_all),
                                                                      "broken": broken_share(got_all, truth_all)}}
        print(name, out["libraries"][name]["pages_per_s"], out["libraries"][name]["all_manuals"], file=sys.stderr)
    return out


# ---------------------------------------------------------------- HTML extractors


def amsrag_html(data: bytes, path: Path) -> tuple[str, list[str]]:
    from amsrag.ingest.blocks import extracted_text
    from amsrag.ingest.parsers import parse_document

    doc = parse_document(path, "html")
    return extracted_text(doc), [b.text for b in doc.blocks if b.kind == "heading"]


def trafilatura_html(data: bytes, path: Path) -> tuple[str, list[str]]:
    import trafilatura

    text = trafilatura.extract(data.decode("utf-8", "replace"), output_format="markdown", include_tables=True,
                               include_comments=False) or ""
    return text, [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def body_text(data: bytes, path: Path) -> tuple[str, list[str]]:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(data.decode("utf-8", "replace"))
    return (tree.body.text(separator=" ") if tree.body else ""), []


HTML_EXTRACTORS = {"amsrag (selectolax)": amsrag_html, "trafilatura": trafilatura_html,
                   "selectolax body text": body_text}
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{3,}\s*$")


def rst_titles(source: str) -> list[str]:
    lines = source.splitlines()
    return [lines[i - 1].strip() for i in range(1, len(lines)) if _RST_UNDERLINE.match(lines[i])
            and lines[i - 1].strip() and not _RST_UNDERLINE.match(lines[i - 1])]


def norm_title(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def compare_html(root: Path, sample: list[Path]) -> dict[str, Any]:
    policy = root / POLICY
    pages = [(p, policy / "_sources" / f"{p.stem}.rst.txt") for p in sorted(policy.glob("*.html"))]
    pages = [(p, s) for p, s in pages if s.exists()]
    out: dict[str, Any] = {"policy_pages": len(pages), "sample_files": len(sample), "extractors": {}}
    for name, extract in HTML_EXTRACTORS.items():
        got_all: Counter[str] = Counter()
        truth_all: Counter[str] = Counter()
        found = titles = 0
        for page, source in pages:
            text, headings = extract(page.read_bytes(), page)
            rst = source.read_text(encoding="utf-8")
            got_all += words(text)
            truth_all += words(rst)
            want = [norm_title(t) for t in rst_titles(rst)]
            have = {norm_title(h) for h in headings}
            titles += len(want)
            found += sum(any(w and w in h for h in have) for w in want)
        t = time.process_time()
        size = 0
        for path in sample:
            data = path.read_bytes()
            size += len(data)
            extract(data, path)
        seconds = time.process_time() - t
        out["extractors"][name] = {**overlap(got_all, truth_all), "headings_found": round(found / max(titles, 1), 4),
                                   "files_per_s": round(len(sample) / seconds, 1),
                                   "mb_per_s": round(size / (1 << 20) / seconds, 2)}
        print(name, out["extractors"][name], file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=cache_root() / "debian-docs")
    parser.add_argument("--fetch", action="store_true", help="download and unpack the packages, then stop")
    parser.add_argument("--html-step", type=int, default=20, help="every N-th HTML file of the set")
    parser.add_argument("--pdf-step", type=int, default=4, help="every N-th other PDF in the library comparison")
    parser.add_argument("--pdf-pages", type=int, default=30, help="first pages of each other PDF compared")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "parsers.json")
    parser.add_argument("--parts", default="amsrag,pages,html,pdf", help="which parts to run (merged into --out)")
    args = parser.parse_args()
    if args.fetch:
        fetch(args.root)
        return
    root = args.root / "root"
    files = the_set(root, args.html_step)
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    result.update({
        "command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
        "packages": json.loads((args.root / "versions.json").read_text()) if (args.root / "versions.json").exists()
        else list(PACKAGES),
        "set": dict(Counter(fmt for _, fmt in files)), "timing": "CPU seconds of this process (one core)",
    })
    parts = args.parts.split(",")
    if "amsrag" in parts:
        result["amsrag"] = amsrag_path(files)
        print(json.dumps(result["amsrag"], indent=1), file=sys.stderr)
    if "pages" in parts:
        result["pages"] = page_check(files, 50)
        print(json.dumps(result["pages"], indent=1), file=sys.stderr)
    if "html" in parts:
        result["html"] = compare_html(root, [p for p, fmt in files if fmt == "html"])
    if "pdf" in parts:
        result["pdf"] = compare_pdf(root, args.pdf_step, args.pdf_pages)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
