"""What every `amsrag` command shares: the consoles, option types, JSON output and the trace printout."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from amsrag.ingest.formats import FORMATS

if TYPE_CHECKING:
    from amsrag.config import GeneratorConfig

out = Console()
err = Console(stderr=True)

IndexOpt = Annotated[str, typer.Option("--index", help="index directory or postgresql:// URL")]
JsonOpt = Annotated[bool, typer.Option("--json", help="one JSON object per line on stdout")]
DataOpt = Annotated[Path | None,
                    typer.Option("--data", help="public data folder (default: $AMSRAG_DATA or ../shared/data)")]
FormatOpt = Annotated[str, typer.Option("--format", help="auto or one of: " + ", ".join(FORMATS))]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress output (bars on a terminal, log lines "
                                        "every 10 s otherwise; $AMSRAG_PROGRESS_INTERVAL sets the seconds)")]


def print_error(exc: BaseException) -> None:
    """An error for the user on stderr, its message printed verbatim (ids and paths may contain `[...]`)."""
    err.print("[bold red]error:[/] " + escape(str(exc)), highlight=False, soft_wrap=True)


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


SystemOpt = Annotated[str, typer.Option("--system", help="full|fixed|A0..A4|bm25|dense|graph|adaptive-rag")]
WhereOpt = Annotated[list[str] | None, typer.Option(
    "--where", help="only passages matching FIELD=VALUE[,VALUE…] (repeatable; fields AND, values OR): "
    "source=GLOB (path in the synced folder or document key), type=pdf,html,docx,pptx,markdown,text, doc=GLOB")]


def generator_config(base: GeneratorConfig, name: str | None, model: str | None,
                     base_url: str | None) -> GeneratorConfig:
    """`base` with the --generator / --model / --base-url options applied (`--model` is the GGUF file for
    llamacpp and the model name for openai)."""
    name = name or base.name
    update: dict[str, Any] = {"name": name}
    if model is not None:
        update["model_path" if name == "llamacpp" else "model"] = model
    if base_url is not None:
        update["base_url"] = base_url
    return base.model_copy(update=update)


def print_trace(trace: Mapping[str, Any]) -> None:
    cx = trace.get("complexity")
    e = escape  # every value is data: an id, an entity, an error message may look like markup
    head = (f"system [bold]{e(str(trace['system']))}[/] · strategy [bold]{e(str(trace['strategy']))}[/] · "
            f"{e(str(trace['reason']))}")
    scope = trace.get("filter")
    if scope:
        from amsrag.filters import Where

        spelled = " ".join(Where.from_json(scope["where"]).cli_args())
        head += f"\nfilter [bold]{e(spelled)}[/]: {scope['allowed']} of {scope['passages']} passages allowed"
    if cx:
        probs = " ".join(f"{e(k)} {v:.2f}" for k, v in cx["probs"].items())
        head += f"\ncomplexity [bold]{e(cx['label'])}[/] (alpha {cx['alpha']:.3f}; {probs})"
        if cx.get("route_label", cx["label"]) != cx["label"]:
            head += (f" → routed as {e(cx['route_label'])} (alpha {cx['route_alpha']:.3f}): "
                     "the generator cannot answer alone")
        vote = cx.get("library")
        if vote:
            nearest = vote["neighbours"][0] if vote["neighbours"] else None
            head += (f"\nquery library: {vote['n_close']} close labelled queries vote p(multi_hop) "
                     f"{vote['p_multi']:.2f} with weight {vote['weight']:.2f}"
                     + (f" (nearest {e(repr(nearest['question']))}: {e(nearest['hop'])}, cosine "
                        f"{nearest['similarity']:.2f})" if nearest else "")
                     + ("; [bold]the library decided the label[/]" if cx.get("decided_by") == "library" else ""))
    weights = " ".join(f"{e(r)} {w:.3f}" for r, w in trace["fusion"]["weights"].items())
    head += f"\nfusion {e(str(trace['fusion']['method']))} weights {weights}"
    params = trace["fusion"]
    if "expert_weights" in params:
        head += (f" (expert weights from the {params['neighbours']} nearest training questions, their share "
                 f"{params['neighbour_share']:.2f})")
    for entry in params.get("explain", []):
        top = ", ".join(f"{e(name)} {value:+.3f}" for name, value in entry["top_features"].items())
        head += f"\n  learned fuser on {e(entry['id'])}: {top}"
    for r in trace["retrievers"]:
        error = f" [red]{e(str(r['error']))}[/]" if r["error"] else ""
        head += f"\n  {e(r['name'])}: {len(r['hits'])} hits in {r['ms']:.1f} ms{error}"
    for rnd in (trace.get("second_hop") or {}).get("rounds", []):
        head += "\nsecond hop via " + ", ".join(f"{e(b['entity'])} (+{len(b['rows'])})" for b in rnd["bridges"])
    corr = trace.get("corrective") or {}
    if corr.get("action") not in (None, "skipped"):
        why = f"S = {corr['score']:.3f}" if corr.get("score") is not None else e(str(corr.get("reason", "")))
        head += f"\ncorrective: {e(str(corr['action']))} ({why})"
    for esc in trace.get("escalations", []):
        head += f"\n  escalated {e(str(esc['from']))} → {e(str(esc['to']))}: {e(str(esc['reason']))}"
    t = trace["timings_ms"]
    tax = trace.get("taxonomy")
    if tax:
        probs = " ".join(f"{e(k)} {v:.2f}" for k, v in tax["probs"].items())
        head += f"\ntaxonomy [bold]{e(tax['label'])}[/] → {e(tax['route'])} route ({e(tax['reason'])}; {probs})"
    for key, what in (("structured", "table route"), ("global", "global route")):
        side = trace.get(key) or {}
        if side.get("fallback"):
            head += f"\n{what} fell back to the text path: {e(str(side['fallback']))}"
        elif key == "global" and side:
            head += f"\nthemes ({e(str(side['selection']))}): " + "; ".join(
                f"{e(', '.join(th['terms'][:4]))} ({th['size']})" for th in side["themes"])
    head += (f"\ntimings (ms): embed {t['embed']}, classify {t.get('classify', 0)}, fusion {t.get('fusion', 0)}, "
             f"mmr {t.get('mmr', 0)}, total {t['total']}")
    out.print(head, highlight=False)
    language = trace.get("language") or {}
    for warning in language.get("warnings", []):
        err.print(f"[yellow]warning:[/] {e(warning)}", highlight=False, soft_wrap=True)
