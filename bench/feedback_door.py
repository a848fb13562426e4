"""The lineage's door: what reading one score costs now that its text is redacted there.

    .venv/bin/python -m bench.feedback_door

A score is read (``domain.feedback.parse_score``: validated, its comment and rater passed
through ``domain.redaction.redact``) by the update's validator and again by its handler, in
the workflow, on every replay too. Prints the time per score for comments of the largest size
the door admits (4,000 characters): prose, prose with pasted keys, and text in each encoding
redaction decodes (percent-encoding, HTML references, ``\\u`` escapes): ``redact()`` alone
and the whole reading of a score. Then ``redact()`` on 64 KB texts, the shapes that cost its
detectors most (a run of ``eyJ`` with no dot, which detect-secrets' JWT pattern alone takes
seconds over; many key-shaped words; base64; punctuation), and on 16 KB of each: a time
four times as long for four times the text is linear.
"""

from __future__ import annotations

import base64
import random
import string
import time
from collections.abc import Callable

from domain.feedback import MAX_COMMENT_CHARS, parse_score
from domain.redaction import redact

KEY = "sk-ant-api03-Qx7vR2mN9pL4kT8wZ1yB6cD3fG5hJ0sA"
COMMENTS = {
    "prose": "Way too long, wanted quick bullets and a warmer tone. ",
    "prose with pasted keys": f"Too long. My key is {KEY}, sorry. ",
    "percent-encoded": "%57%61%79%20%74%6F%6F%20",
    "HTML references": "&#x57;&#x61;&#x79;&amp; ",
    "\\u escapes": "\\u0057\\u0061\\u0079 ",
}
ROUNDS = 200
LARGE = 64 * 1024
_rng = random.Random(7)
LARGE_TEXTS = {
    "prose": COMMENTS["prose"],
    "prose with pasted keys": COMMENTS["prose with pasted keys"],
    "key-shaped words": "sk-a ghp_x AKIA eyJa. xoxb-1 ",
    "eyJ with no dot": "eyJ",
    "base64": base64.b64encode(_rng.randbytes(3 * 1024)).decode(),
    "mixed-case words": " ".join(
        "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(24))
        for _ in range(64)
    )
    + " ",
    "percent-encoded": COMMENTS["percent-encoded"],
    "punctuation": "!?.,;:-",
}


def per_call(call: Callable[[], object]) -> float:
    """Milliseconds per call, the best of three runs of ROUNDS calls."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            call()
        best = min(best, (time.perf_counter() - started) / ROUNDS)
    return best * 1000


def main() -> None:
    print(f"{'comment (4,000 characters)':<28} {'redact()':>10} {'parse_score':>12}")
    for name, piece in COMMENTS.items():
        text = (piece * (MAX_COMMENT_CHARS // len(piece) + 1))[:MAX_COMMENT_CHARS]
        payload = {"score": 5, "comment": text, "rater": "ana"}
        masked = per_call(lambda text=text: redact(text))
        parsed = per_call(lambda payload=payload: parse_score(payload))
        print(f"{name:<28} {masked:>8.2f} ms {parsed:>9.2f} ms")
    print(f"\n{'redact(), text of':<28} {'64 KB':>10} {'16 KB':>10}")
    for name, piece in LARGE_TEXTS.items():
        large = (piece * (LARGE // len(piece) + 1))[:LARGE]
        small = large[: LARGE // 4]
        print(
            f"{name:<28} {once(lambda t=large: redact(t)):>7.1f} ms "
            f"{once(lambda t=small: redact(t)):>7.1f} ms"
        )


def once(call: Callable[[], object]) -> float:
    """Milliseconds for one call, the best of three."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


if __name__ == "__main__":
    main()
