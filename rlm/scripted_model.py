"""The offline scripted RLM model: no API key, no network, and not Claude. It writes real REPL
programs for the document-analysis task the examples run (hypotheses about a set of documents,
one worker per document, evidence linked with supports / contradicts, the root counting links),
so the demo and the tests exercise cells, workers, commits and FINAL_VAR for real. It reads
its role from the system prompt (depth, shared store, whether it may start workers) and its
step from how many cells it has written; the programs read the task from ``context``.
"""

from __future__ import annotations

import re

from rlm.repl import ReplMessage

NAME = "offline-rlm-scripted"

ROOT_LOOK = """docs = context["documents"]
hypotheses = context["hypotheses"]
print(len(docs), "documents:", ", ".join(d["name"] for d in docs))
for h in hypotheses:
    print(h["id"], "-", h["statement"])"""

ROOT_FAN_OUT = """for h in hypotheses:
    store.create("hypothesis", h["statement"], content={"id": h["id"]}, tags=["hypothesis"],
                 id=h["id"])
cards = store.card_view("type=hypothesis")
tasks = [
    {"prompt": f"Find evidence in {d['name']} for or against each hypothesis.",
     "context": {"document": d, "hypotheses": hypotheses}, "store_cards": cards}
    for d in docs
]
commits = rlm_worker_batched(tasks, max_parallel=context.get("max_parallel", 4))
for d, commit in zip(docs, commits):
    print(d["name"], apply_commit(commit, batch_prefix=d["name"]))"""

ROOT_FAN_OUT_SHARED = """cards = [
    {"id": h["id"], "type": "hypothesis", "description": h["statement"]} for h in hypotheses
]
tasks = [
    {"prompt": f"Find evidence in {d['name']} for or against each hypothesis.",
     "context": {"document": d, "hypotheses": hypotheses, "peers": len(docs)},
     "store_cards": cards}
    for d in docs
]
results = rlm_worker_batched(tasks, max_parallel=context.get("max_parallel", 4))
print(len(results), "workers done;", len(store.view("type=evidence")), "evidence in the store")"""

ROOT_COUNT = """links = store.view("type=link")
tally = {h["id"]: {"supports": 0, "contradicts": 0} for h in hypotheses}
for link in links:
    c = link["content"]
    if c.get("dst") in tally and c.get("type") in ("supports", "contradicts"):
        tally[c["dst"]][c["type"]] += 1
margin = {h: t["supports"] - t["contradicts"] for h, t in tally.items()}
winner = max(sorted(margin), key=lambda h: margin[h])
print(tally)
pending = store.summary()["pending_proposals"] if "summary" in dir(store) else 0
FINAL_VAR({"winner": winner, "tally": tally, "links": len(links), "pending_proposals": pending})"""

WORKER_LOOK = """doc = context["document"]
hypotheses = context["hypotheses"]
paragraphs = [p.strip() for p in doc["text"].split("\\n\\n") if p.strip()]
print(doc["name"], "-", len(paragraphs), "paragraphs")"""

# The evidence search, shared by the isolated and shared variants: a paragraph supports or
# contradicts a hypothesis when it says one of the hypothesis's words for either side.
_FIND = """def stance(paragraph, h):
    low = paragraph.lower()
    for side in ("supports", "contradicts"):
        if any(word in low for word in h[side]):
            return side
    return None

found = []
for p in mine:
    for h in hypotheses:
        side = stance(p, h)
        if side:
            start = doc["text"].find(p)
            eid = store.create(
                "evidence", p[:160], content={"quote": p, "hypothesis": h["id"], "stance": side},
                backrefs=[{"source_id": doc["name"], "start": start, "end": start + len(p)}],
                tags=["evidence", "doc:" + doc["name"]])
            found.append((eid, side, h["id"]))
print(len(found), "pieces of evidence")"""

WORKER_ANALYSE = (
    """mine = paragraphs
if "rlm_worker" in globals() and len(paragraphs) > 2:
    half = len(paragraphs) // 2
    mine = paragraphs[:half]
    rest = {"name": doc["name"] + "#2", "text": "\\n\\n".join(paragraphs[half:])}
    sub = rlm_worker(f"Find evidence in the second half of {doc['name']}.",
                     store_cards=[{"id": h["id"], "type": "hypothesis",
                                   "description": h["statement"]} for h in hypotheses],
                     context={"document": rest, "hypotheses": hypotheses})
    print("second half:", apply_commit(sub, batch_prefix="part2"))
"""
    + _FIND
    + """
summary = llm_query("Summarise in one sentence: " + doc["text"][:2000])
store.create("summary", summary, tags=["summary", "doc:" + doc["name"]])
links = [{"type": side, "src": eid, "dst": h} for eid, side, h in found]
counts = {}
for _, side, h in found:
    counts[h] = counts.get(h, 0) + (1 if side == "supports" else -1)
updates = [{"target_id": h, "patch": {"net_support_" + doc["name"]: n}} for h, n in counts.items()]
print(apply_commit({"commit_id": "links", "links": links, "proposes_updates": updates}))"""
)

WORKER_FINISH = """FINAL_VAR(f"{len(found)} pieces of evidence in {doc['name']}")"""

SHARED_WORKER_ANALYSE = (
    "mine = paragraphs\n"
    + _FIND
    + """
for eid, side, h in found:
    store.create("link", f"{eid} {side} {h}", content={"type": side, "src": eid, "dst": h},
                 tags=[side])"""
)

# Wait (bounded) until another worker's evidence shows: workers see each other while they run.
SHARED_WORKER_PEERS = """import time
others = store.view_others("type=evidence")
waited = 0.0
while context.get("peers", 1) > 1 and not others and waited < 8:
    time.sleep(0.05)
    waited += 0.05
    others = store.view_others("type=evidence")
seen = sorted({o["worker"] for o in others})
print("evidence from other workers:", seen)
FINAL_VAR({"document": doc["name"], "evidence": len(found), "saw_workers": seen})"""


def reply(system: str, messages: list[ReplMessage]) -> str:
    """The next cell for this REPL, as a model reply with a ```repl block."""
    depth = int(m.group(1)) if (m := re.search(r"at depth (\d+)", system)) else 0
    shared = "Shared store:" in system
    step = sum(1 for m in messages if m.role == "assistant")
    if depth == 0:
        script = [ROOT_LOOK, ROOT_FAN_OUT_SHARED if shared else ROOT_FAN_OUT, ROOT_COUNT]
    elif shared:
        script = [WORKER_LOOK, SHARED_WORKER_ANALYSE, SHARED_WORKER_PEERS]
    else:
        script = [WORKER_LOOK, WORKER_ANALYSE, WORKER_FINISH]
    if step >= len(script):
        return "```repl\nFINAL_VAR(None)\n```"
    return f"Step {step + 1}.\n```repl\n{script[step]}\n```"


def answer(prompt: str) -> str:
    """``llm_query`` offline: the first sentence of the text the prompt asks about."""
    text = prompt.split(":", 1)[-1].strip()
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
    return first[:300]
