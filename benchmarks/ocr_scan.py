"""OCR of scanned PDF pages (the `ocr` extra): how many of a page's words come back, and the seconds per page.

A page of tests/fixtures/documents/debian-reference-p30-33.pdf is rendered to a grey bitmap at each scan
resolution and saved as an image-only PDF (what a scanner makes); `parse_document` reads it back by OCR. Word
recall is over the words of 4+ letters of the page's own text layer (multiset overlap).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/ocr_scan.py --pages 2
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "documents" / "debian-reference-p30-33.pdf"


def scan_page(index: int, dpi: int, out: Path) -> Path:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(SOURCE))
    doc[index].render(scale=dpi / 72, grayscale=True).to_pil().save(out, "PDF", resolution=dpi)
    doc.close()
    return out


def layer_words(index: int) -> Counter[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(SOURCE))
    text = doc[index].get_textpage().get_text_range()
    doc.close()
    return Counter(re.findall(r"[a-z]{4,}", text.lower()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=2, help="the first N pages of the fixture")
    ap.add_argument("--dpi", default="150,300", help="scan resolutions")
    args = ap.parse_args()
    from amsrag.ingest.blocks import extracted_text
    from amsrag.ingest.parsers import ocr, parse_document

    if not ocr.available():
        raise SystemExit("install the ocr extra: pip install 'amsrag[ocr]'")
    print("| scan dpi | page | word recall | seconds |\n| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        parse_document(scan_page(0, 150, Path(tmp) / "warm.pdf"), "pdf")  # the engine's load is not a page's cost
        for dpi in (int(d) for d in args.dpi.split(",")):
            for index in range(args.pages):
                scan = scan_page(index, dpi, Path(tmp) / f"p{index}-{dpi}.pdf")
                t = time.perf_counter()
                read = Counter(re.findall(r"[a-z]{4,}", extracted_text(parse_document(scan, "pdf")).lower()))
                seconds = time.perf_counter() - t
                layer = layer_words(index)
                recall = sum((layer & read).values()) / max(sum(layer.values()), 1)
                print(f"| {dpi} | {index + 1} | {recall:.3f} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
