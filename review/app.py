"""The review inbox: a web app for the people who score (Starlette, Jinja2 templates).

Every action goes to the lineage's workflow exactly as from the Temporal CLI — a score through
the ``submit_score`` update (so the lineage's own validation answers inline), directives, locks,
unlocks, stop and retry as signals — with the rater's name; a branch from a version starts a
new lineage as ``training-camp branch`` does. Pages read Temporal (who awaits a
score, each lineage's state) and the store (outputs, versions, evolutions, scores, blame). With
a token set, every page and action requires it (a login form sets it as a cookie).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities.reading_preview import preview_reading
from activities.trainer import TrainerActivities
from client import branch_lineage, correction_outcome
from domain import tool_flow, want_labels, wants
from domain.feedback import MAX_RATER_CHARS, redacted
from domain.redaction import MASK
from domain.settings import Settings
from domain.trainer import MAX_PLANNED_CHANGES
from review import views
from review.guard import LOOPBACK_HOSTS, Guard
from services.terminal import printable
from store import Store
from trainer.backends import TrainerBackends
from workflows.lineage import LineageWorkflow

HERE = Path(__file__).parent
TOKEN_COOKIE = "review_token"
RATER_COOKIE = "review_rater"
MAX_COMMENT_CHARS = 4000
MAX_FORM_FIELDS = 10
# how long a correction's answer waits for the re-plan before saying it is under way (the card
# shows the outcome either way)
CORRECTION_WAIT_SECONDS = 10.0
POLL_SECONDS = 0.25  # how often the live stream looks for changes
BRANCH_WAIT_SECONDS = 10.0  # a branch's answer waits this long for its lineage's registration
NO_NAME = (
    "Type your name in “Your name” at the top of the page first: every score and action is "
    "recorded under it (asked once, remembered in this browser)."
)

templates = Jinja2Templates(directory=HERE / "templates")  # autoescape on for .html
# the pickers' choices: every family a want may name, in its words, and the actions
templates.env.globals["want_families"] = want_labels.glossary()
templates.env.globals["want_actions"] = ["add", "more", "less", "remove", "keep"]
templates.env.filters["want_label"] = want_labels.label
# text from outside (a tool's result, a document) with its control characters shown escaped
templates.env.filters["printable"] = printable


def rater_cookie(request: Request) -> str | None:
    """The rater's name this browser keeps: given at sign-in, and set by the page as the name
    is typed (percent-encoded, as a cookie carries any name). None when it says none."""
    name = urllib.parse.unquote(request.cookies.get(RATER_COOKIE) or "")
    return redacted(name.strip()[:MAX_RATER_CHARS]) or None


templates.env.globals["rater_cookie"] = rater_cookie  # the name field, filled in


class TokenRequired(BaseHTTPMiddleware):
    """Outside the embedded default: the token, from the login cookie or a bearer header."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token.encode()

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path in ("/login",) or request.url.path.startswith("/static/"):
            return await call_next(request)
        offered = request.cookies.get(TOKEN_COOKIE) or ""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            offered = header[7:]
        if hmac.compare_digest(offered.encode(), self.token):
            return await call_next(request)
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse("/login", status_code=303)
        return JSONResponse({"error": "a review token is required"}, status_code=401)


def create_app(
    client: Client,
    store: Store,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS,
    settings: Settings | None = None,
) -> Any:
    """The app, behind its guard (``review/guard.py``): ``allowed_hosts`` are the host names it
    answers to (None: any, for a deployment behind a proxy that checks them). ``settings``
    give the previews their Claude key and corrections setting, as the worker's give the
    step (default: no key, the session's corrections)."""
    return Guard(_app(client, store, token, settings or Settings()), allowed_hosts=allowed_hosts)


class _Handlers:
    """The app's request handlers, over one Temporal client and one store."""

    def __init__(self, client: Client, store: Store, token: str | None, settings: Settings) -> None:
        self.client, self.store, self.token = client, store, token
        self.backends = TrainerBackends(settings)
        self.shared_corrections = settings.shared_corrections
        # the step's own planning, for the changes a reading would make (as the worker's)
        self.planner = TrainerActivities(store, self.backends, self.shared_corrections).planned

    def rater_of(self, request: Request, form: Any) -> str | None:
        """The rater's name: the page's field, else the name given at sign-in. None when
        neither says it: a score must name who gave it, never a made-up "reviewer"."""
        name = str(form.get("rater") or "")
        return redacted(name.strip()[:MAX_RATER_CHARS]) or rater_cookie(request)

    async def inbox_page(self, request: Request) -> Response:
        session = _session_param(request)
        box = await views.inbox(self.client, self.store, session)
        return templates.TemplateResponse(request, "inbox.html", {"inbox": box})

    async def inbox_rows(self, request: Request) -> Response:
        box = await views.inbox(self.client, self.store, _session_param(request))
        return templates.TemplateResponse(request, "_inbox_rows.html", {"inbox": box})

    async def session_page(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        cards = await views.session_cards(self.client, self.store, session_id)
        if not cards:
            return Response(f"no session {session_id!r}", status_code=404, media_type="text/plain")
        front = views.session_front([v.row for card in cards for v in card.versions])
        return templates.TemplateResponse(
            request,
            "session.html",
            {
                "session_id": session_id,
                "cards": cards,
                "front": front,
                # several raters: each card's correction starts from this rater's own reading
                "rater": rater_cookie(request),
            },
        )

    async def card_fragment(self, request: Request) -> Response:
        card = await views.lineage_card(self.client, self.store, request.path_params["lineage_id"])
        if card is None:
            return Response("no such lineage", status_code=404, media_type="text/plain")
        return templates.TemplateResponse(
            request, "_card_body.html", {"card": card, "rater": rater_cookie(request)}
        )

    async def score(self, request: Request) -> Response:
        # a confirmed reading sends its wishes and its plan's changes as fields of their own
        form = await request.form(
            max_files=0, max_fields=wants.MAX_WANTS + MAX_PLANNED_CHANGES + MAX_FORM_FIELDS
        )
        rater = self.rater_of(request, form)
        if rater is None:
            return JSONResponse({"error": NO_NAME}, status_code=422)
        payload: dict[str, Any] = {"rater": rater}
        raw_score = str(form.get("score", "")).strip()
        try:
            payload["score"] = float(raw_score)
        except ValueError:
            payload["score"] = raw_score  # the lineage's validation names the problem
        comment = str(form.get("comment") or "").strip()
        if comment:
            # a pasted key is masked before it leaves for Temporal (whose history keeps the
            # update's input as sent), not only where the lineage stores it
            payload["comment"] = redacted(comment[:MAX_COMMENT_CHARS])
        cycle = str(form.get("cycle") or "")
        if cycle.isdigit():
            payload["cycle"] = int(cycle)
        output_id = str(form.get("output_id") or "")
        if output_id:  # the output on the page: refused if a re-run has replaced it
            payload["output_id"] = output_id
        if form.get("confirmed"):
            # the reading the rater saw and confirmed: the step acts on exactly these wishes
            payload["wants"] = [str(w).strip() for w in form.getlist("want") if str(w).strip()]
        if form.get("planned"):
            # the plan the rater saw, less the changes they left out: the step makes these
            payload["changes"] = [str(k).strip() for k in form.getlist("change") if str(k).strip()]
        handle = await self._handle(request)
        if handle is None:
            return JSONResponse({"error": "no such lineage"}, status_code=404)
        accepted, refused = await _update(handle, LineageWorkflow.submit_score, payload)
        if refused is not None:
            return refused
        said = accepted.said()
        if MASK in (accepted.comment or "") and MASK not in comment:
            said += f" (something in your comment looked like a credential: kept as {MASK})"
        # how the comment was read, at once: a misreading is corrected before it costs a cycle
        return JSONResponse({"ok": f"{said}. {accepted.reading}" if accepted.reading else said})

    async def read(self, request: Request) -> Response:
        """How the lineage's step would read this score and comment (``trainer/preview.py``),
        for the chips under the comment as the rater types. Changes nothing; a POST (behind
        the guard's origin check) because it may ask Claude, which costs."""
        form = await request.form(max_files=0, max_fields=wants.MAX_WANTS + MAX_FORM_FIELDS)
        try:
            score = float(str(form.get("score", "")).strip())
        except ValueError:
            score = -1.0
        if not 0 <= score <= 10:
            return JSONResponse(
                {"error": "type a score from 0 to 10 to see how your comment is read"},
                status_code=422,
            )
        comment = str(form.get("comment") or "").strip()[:MAX_COMMENT_CHARS] or None
        edited = None  # the chips as the rater edited them: the reading and plan are theirs
        if form.get("edited"):
            edited = [redacted(str(w).strip()) for w in form.getlist("want") if str(w).strip()]
            try:
                wants.validated(edited)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=422)
        try:
            _, seen = await preview_reading(
                self.client,
                self.store,
                self.backends,
                request.path_params["lineage_id"],
                score,
                comment,
                self.shared_corrections,
                edited,
                self.planner,
                self.rater_of(request, form),
            )
        except KeyError:
            return JSONResponse({"error": "no such lineage"}, status_code=404)
        except RPCError as exc:
            return JSONResponse({"error": f"Temporal refused: {exc.message}"}, status_code=502)
        return JSONResponse({**seen.model_dump(), "exact": seen.exact})

    async def want_label(self, request: Request) -> Response:
        """A wish the rater adds, checked and in words ("shorter:half" → "shorter: about
        half"), or the reason it is not one."""
        # names in lower case; a sentence for a step or a tool as the rater wrote it
        want = tool_flow.lower_head(request.query_params.get("want", "").strip())
        try:
            return JSONResponse({"want": want, "label": want_labels.label(want)})
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)

    async def correct(self, request: Request) -> Response:
        """The rater's correction of how their last comment was read: the wishes they meant,
        through the ``correct_reading`` update (validated by the lineage, answered inline)."""
        form = await request.form(max_files=0, max_fields=wants.MAX_WANTS + MAX_FORM_FIELDS)
        rater = self.rater_of(request, form)
        if rater is None:
            return JSONResponse({"error": NO_NAME}, status_code=422)
        meant = [redacted(str(w).strip()) for w in form.getlist("want") if str(w).strip()]
        handle = await self._handle(request)
        if handle is None:
            return JSONResponse({"error": "no such lineage"}, status_code=404)
        # the score whose reading the card shows: refused if it is no longer the latest
        payload: dict[str, Any] = {"wants": meant, "rater": rater}
        evaluation_id = str(form.get("evaluation_id") or "")
        if evaluation_id:
            payload["evaluation_id"] = evaluation_id
        accepted, refused = await _update(handle, LineageWorkflow.correct_reading, payload)
        if refused is not None:
            return refused
        try:
            done = await asyncio.wait_for(
                correction_outcome(handle, accepted), CORRECTION_WAIT_SECONDS
            )
        except (TimeoutError, ValueError, RPCError, WorkflowUpdateFailedError):
            return JSONResponse(
                {"ok": f"correction of cycle {accepted.cycle}'s reading taken; the card shows it"}
            )
        if done.error is not None:
            return JSONResponse({"error": done.error}, status_code=422)
        # at once, on the card: a cycle run again, or nothing new (the reading is refreshed)
        return JSONResponse({"ok": f"{done.reading}; {done.outcome()}"})

    async def signal(self, request: Request) -> Response:
        """directive (sticky / oneshot), lock, unlock, stop, retry: signals, as from the CLI."""
        action = request.path_params["action"]
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        rater = self.rater_of(request, form)
        if rater is None:
            return JSONResponse({"error": NO_NAME}, status_code=422)
        if action == "directive":
            kind = str(form.get("kind") or "sticky")
            content = redacted(str(form.get("content") or ""))
            name, payload = "directive", {"kind": kind, "content": content}
        elif action in ("lock", "unlock", "stop"):
            name, payload = action, {"reason": redacted(str(form.get("reason") or "")) or None}
        elif action == "retry":
            name, payload = "retry", {}
        else:
            return JSONResponse({"error": f"unknown action {action!r}"}, status_code=404)
        payload["rater"] = rater
        handle = await self._handle(request)
        if handle is None:
            return JSONResponse({"error": "no such lineage"}, status_code=404)
        try:
            await handle.signal(name, payload)
        except RPCError as exc:
            return JSONResponse({"error": f"Temporal refused: {exc.message}"}, status_code=502)
        return JSONResponse({"ok": f"{name} sent"})

    async def branch(self, request: Request) -> Response:
        """A new lineage of the session from a version of this one (the version history's
        button), as `training-camp branch` starts it; refused inline with the reason."""
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        rater = self.rater_of(request, form)
        if rater is None:
            return JSONResponse({"error": NO_NAME}, status_code=422)
        version = str(form.get("version") or "").strip().lower().removeprefix("v")
        if not version.isdigit() or int(version) < 1:
            return JSONResponse({"error": "name a version to branch from"}, status_code=422)
        label = str(form.get("label") or "").strip() or None
        lineage_id = request.path_params["lineage_id"]
        row = await asyncio.to_thread(self.store.queries.lineage, lineage_id)
        if row is None:
            return JSONResponse({"error": "no such lineage"}, status_code=404)
        session = str(form.get("session") or "") or None  # the page's session, if it says
        try:
            made = await branch_lineage(
                self.client, self.store, row.id, int(version), label, session, rater
            )
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        except RPCError as exc:
            return JSONResponse({"error": f"Temporal refused: {exc.message}"}, status_code=502)
        # answered once the new lineage is in the store, so the page reloaded shows its card
        for _ in range(int(BRANCH_WAIT_SECONDS / POLL_SECONDS)):
            if await asyncio.to_thread(self.store.queries.lineage, made.lineage_id):
                break
            await asyncio.sleep(POLL_SECONDS)
        return JSONResponse(
            {
                "ok": f"{made.label} started from {row.label} v{version}",
                "lineage": made.lineage_id,
            }
        )

    async def _handle(self, request: Request) -> Any:
        row = await asyncio.to_thread(self.store.queries.lineage, request.path_params["lineage_id"])
        return None if row is None else self.client.get_workflow_handle(row.workflow_id)

    async def events(self, request: Request) -> Response:
        """Server-sent events: ``change`` whenever what the page shows changes."""
        session = _session_param(request)

        async def look() -> str:
            if session is None or request.query_params.get("page") == "inbox":
                return (await views.inbox(self.client, self.store, session)).signature
            return await views.signatures(self.client, self.store, session)

        async def stream() -> AsyncIterator[str]:
            last = None
            while not await request.is_disconnected():
                now = await look()
                if now != last:
                    yield f"event: change\ndata: {json.dumps(now)}\n\n"
                    last = now
                await asyncio.sleep(POLL_SECONDS)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return templates.TemplateResponse(request, "login.html", {"error": None})
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        offered = str(form.get("token") or "")
        if self.token is None or not hmac.compare_digest(offered.encode(), self.token.encode()):
            return templates.TemplateResponse(
                request, "login.html", {"error": "That token is not right."}, status_code=401
            )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, offered, httponly=True, samesite="strict")
        name = str(form.get("rater") or "").strip()[:MAX_RATER_CHARS]
        # percent-encoded, as the page sets it as the name is typed (rater_cookie decodes it)
        response.set_cookie(RATER_COOKIE, urllib.parse.quote(name, safe=""), samesite="strict")
        return response


def _app(client: Client, store: Store, token: str | None, settings: Settings) -> Starlette:
    h = _Handlers(client, store, token, settings)
    routes = [
        Route("/", h.inbox_page),
        Route("/inbox/rows", h.inbox_rows),
        Route("/sessions/{session_id}", h.session_page),
        Route("/lineages/{lineage_id}/card", h.card_fragment),
        Route("/lineages/{lineage_id}/score", h.score, methods=["POST"]),
        Route("/lineages/{lineage_id}/correct", h.correct, methods=["POST"]),
        Route("/lineages/{lineage_id}/read", h.read, methods=["POST"]),
        Route("/wants/label", h.want_label),
        Route("/lineages/{lineage_id}/branch", h.branch, methods=["POST"]),
        Route("/lineages/{lineage_id}/{action}", h.signal, methods=["POST"]),
        Route("/events", h.events),
        Route("/login", h.login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(TokenRequired, token=token)] if token else []
    return Starlette(routes=routes, middleware=middleware)


async def _update(handle: Any, update: Any, payload: Any) -> tuple[Any, JSONResponse | None]:
    """An update's result, or the answer to give when the lineage (422) or Temporal (502)
    refuses it, with the reason."""
    try:
        return await handle.execute_update(update, payload), None
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        message = cause.message if isinstance(cause, ApplicationError) else str(cause)
        return None, JSONResponse({"error": message}, status_code=422)
    except RPCError as exc:
        return None, JSONResponse({"error": f"Temporal refused: {exc.message}"}, status_code=502)


def _session_param(request: Request) -> str | None:
    session = request.query_params.get("session") or None
    if session is not None and not views.SESSION_ID.match(session):
        return None
    return session
